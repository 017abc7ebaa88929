//! The AST of the thesis's even/odd program (Listing 3.1), written with its Unicode arrows.

const EVEN_ODD: &str = "number(n) −> int32(n).
number(0).
number(1).
//other number facts elided for brevity
next(n,m) −> int32(n), int32(m).
next(0, 1).
next(1, 2).
//other next facts elided for brevity

even(n) −> int32(n).
even(0).
even(n) ←number(n),next(m,n),odd(m).

odd(n) −> int32(n).
odd(n) ←next(m,n), even(m).
";

#[test]
fn even_odd_ast() {
    let (program, diags) = fox_syntax::parse(EVEN_ODD);
    assert!(diags.is_empty(), "{diags:?}");
    insta::assert_debug_snapshot!(program);
}

#[test]
fn even_odd_pretty() {
    let (program, _) = fox_syntax::parse(EVEN_ODD);
    insta::assert_snapshot!(fox_syntax::pretty::print_program(&program));
}
