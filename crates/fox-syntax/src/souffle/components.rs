//! Soufflé's components, expanded away before lowering: every `.init inst = C<…>` is
//! replaced by the elements of `C` (and of the components it inherits from), with
//!
//! - the component's type parameters replaced by the instance's arguments (in attribute
//!   types, type declarations, base components and nested instances: a parameter may
//!   name a component);
//! - every relation and type the instance declares (its own, its bases', and those of
//!   its nested instances, already qualified by their instance names) renamed
//!   `inst.name`, in declarations, clauses and I/O directives; a name the instance does
//!   not declare is left for the enclosing scope to resolve (a component may add rules
//!   to relations of the program, or of the component it is instantiated in);
//! - the clauses a base gives an `overridable` relation dropped where the inheriting
//!   component says `.override rel`.
//!
//! Component declarations are visible in the scope that declares them and in the scopes
//! nested in it; an inner declaration hides an outer one of the same name. The result
//! holds no component, instance or override: a plain Soufflé program whose qualified
//! names (`inst.rel`) are ordinary relation names.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::ast::*;
use crate::ast::Ident;
use crate::diag::Diagnostic;

/// Instances nested deeper than this are refused (a component instantiating itself).
const MAX_DEPTH: usize = 64;
/// A program expanding to more instances than this is refused (components that
/// instantiate one another several times grow exponentially).
const MAX_INSTANCES: usize = 100_000;

/// The program with every component instance expanded; errors as diagnostics.
pub fn expand(items: Vec<SItem>, diags: &mut Vec<Diagnostic>) -> Vec<SItem> {
    if !items
        .iter()
        .any(|it| matches!(it, SItem::Comp(_) | SItem::Init(_) | SItem::Override(_)))
    {
        return items;
    }
    let mut x = Expander { diags, instances: 0 };
    let scope = Scope::new(None, &items);
    let mut out = Vec::new();
    for it in items.iter() {
        match it {
            SItem::Comp(_) => {}
            SItem::Init(init) => {
                if let Some(mut content) = x.instance(init, &scope, &HashMap::new(), 0) {
                    out.append(&mut content);
                }
            }
            SItem::Override(name) => x.diags.push(
                Diagnostic::error("`.override` outside a component", name.span).with_label("not inside a `.comp`"),
            ),
            other => out.push(other.clone()),
        }
    }
    out
}

/// The component declarations visible at a point: those of one block, then the
/// enclosing scope's.
struct Scope {
    comps: HashMap<String, Rc<SComp>>,
    parent: Option<Rc<Scope>>,
}

impl Scope {
    fn new(parent: Option<Rc<Scope>>, items: &[SItem]) -> Rc<Scope> {
        let comps = items
            .iter()
            .filter_map(|it| match it {
                SItem::Comp(c) => Some((c.name.name.clone(), Rc::new(c.clone()))),
                _ => None,
            })
            .collect();
        Rc::new(Scope { comps, parent })
    }

    fn find(self: &Rc<Scope>, name: &str) -> Option<(Rc<SComp>, Rc<Scope>)> {
        match self.comps.get(name) {
            Some(c) => Some((c.clone(), self.clone())),
            None => self.parent.as_ref()?.find(name),
        }
    }
}

/// Type parameter → argument (a type or a component name).
type Binding = HashMap<String, String>;

struct Expander<'a> {
    diags: &'a mut Vec<Diagnostic>,
    /// Instances expanded so far.
    instances: usize,
}

impl Expander<'_> {
    /// The elements of instance `init`, renamed into its namespace.
    fn instance(&mut self, init: &SInit, scope: &Rc<Scope>, binding: &Binding, depth: usize) -> Option<Vec<SItem>> {
        if depth > MAX_DEPTH {
            self.diags.push(
                Diagnostic::error(
                    format!("components are instantiated more than {MAX_DEPTH} levels deep here"),
                    init.span,
                )
                .with_label("does a component instantiate itself?"),
            );
            return None;
        }
        self.instances += 1;
        if self.instances > MAX_INSTANCES {
            if self.instances == MAX_INSTANCES + 1 {
                self.diags.push(
                    Diagnostic::error(
                        format!("the program expands to more than {MAX_INSTANCES} component instances"),
                        init.span,
                    )
                    .with_label("the instance past the limit"),
                );
            }
            return None;
        }
        let content = self.content(&init.ty, scope, binding, depth)?;
        Some(qualify(content, &init.name.name))
    }

    /// The elements a component type stands for (its bases', then its own, nested
    /// instances expanded), not yet renamed into an instance's namespace.
    fn content(&mut self, ty: &SCompType, scope: &Rc<Scope>, binding: &Binding, depth: usize) -> Option<Vec<SItem>> {
        let name = binding.get(&ty.name.name).unwrap_or(&ty.name.name);
        let Some((comp, found_in)) = scope.find(name) else {
            self.diags.push(
                Diagnostic::error(format!("unknown component `{name}`"), ty.name.span)
                    .with_label("no `.comp` of this name is visible here"),
            );
            return None;
        };
        if comp.params.len() != ty.args.len() {
            self.diags.push(
                Diagnostic::error(
                    format!(
                        "component `{}` takes {} type argument{} but {} {} given",
                        comp.name.name,
                        comp.params.len(),
                        if comp.params.len() == 1 { "" } else { "s" },
                        ty.args.len(),
                        if ty.args.len() == 1 { "was" } else { "were" }
                    ),
                    ty.name.span,
                )
                .with_label("wrong number of type arguments"),
            );
            return None;
        }
        let inner: Binding = comp
            .params
            .iter()
            .zip(&ty.args)
            .map(|(p, a)| (p.name.clone(), binding.get(&a.name).unwrap_or(&a.name).clone()))
            .collect();
        // Nested declarations are visible in the body and in its instances.
        let body_scope = Scope::new(Some(found_in.clone()), &comp.body);
        let mut out = Vec::new();
        for base in &comp.bases {
            out.append(&mut self.content(base, &body_scope, &inner, depth + 1)?);
        }
        // `.override r`: the bases' clauses for `r` give way to this component's.
        let overrides: Vec<&Ident> = comp
            .body
            .iter()
            .filter_map(|it| match it {
                SItem::Override(r) => Some(r),
                _ => None,
            })
            .collect();
        for r in overrides {
            let declared = out.iter().find_map(|it| match it {
                SItem::Decl(d) if d.name.name == r.name => Some(d.overridable),
                _ => None,
            });
            match declared {
                None => {
                    self.diags.push(
                        Diagnostic::error(
                            format!("`.override {}`: no inherited relation has this name", r.name),
                            r.span,
                        )
                        .with_label("not declared by a base component"),
                    );
                    return None;
                }
                Some(false) => {
                    self.diags.push(
                        Diagnostic::error(format!("relation `{}` is not declared `overridable`", r.name), r.span)
                            .with_label("cannot be overridden"),
                    );
                    return None;
                }
                Some(true) => {
                    out.retain(|it| !matches!(it, SItem::Clause(c) if c.heads.iter().any(|h| h.rel.name == r.name)))
                }
            }
        }
        let ty_of = |t: &Ident| Ident {
            name: inner.get(&t.name).unwrap_or(&t.name).clone(),
            span: t.span,
        };
        for it in &comp.body {
            match it {
                SItem::Comp(_) | SItem::Override(_) => {}
                SItem::Init(init) => out.append(&mut self.instance(init, &body_scope, &inner, depth + 1)?),
                SItem::Decl(d) => {
                    let mut d = d.clone();
                    d.attrs.iter_mut().for_each(|(_, t)| *t = ty_of(t));
                    out.push(SItem::Decl(d));
                }
                SItem::Type(t) => {
                    let mut t = t.clone();
                    match &mut t.def {
                        STypeDef::Union(parts) => parts.iter_mut().for_each(|p| *p = ty_of(p)),
                        STypeDef::Record(fields) => fields.iter_mut().for_each(|(_, p)| *p = ty_of(p)),
                        STypeDef::Adt(branches) => branches
                            .iter_mut()
                            .flat_map(|(_, fs)| fs.iter_mut())
                            .for_each(|(_, p)| *p = ty_of(p)),
                    }
                    out.push(SItem::Type(t));
                }
                other => out.push(other.clone()),
            }
        }
        Some(out)
    }
}

/// `items` with every relation and type they declare renamed `inst.name`.
fn qualify(items: Vec<SItem>, inst: &str) -> Vec<SItem> {
    let mut rels = HashSet::new();
    let mut types = HashSet::new();
    let mut ctors = HashSet::new();
    for it in &items {
        match it {
            SItem::Decl(d) => {
                rels.insert(d.name.name.clone());
            }
            SItem::Type(t) => {
                types.insert(t.name.name.clone());
                if let STypeDef::Adt(branches) = &t.def {
                    ctors.extend(branches.iter().map(|(b, _)| b.name.clone()));
                }
            }
            _ => {}
        }
    }
    let rel = |r: &mut Ident| {
        if rels.contains(&r.name) {
            r.name = format!("{inst}.{}", r.name);
        }
    };
    let ty = |t: &mut Ident| {
        if types.contains(&t.name) {
            t.name = format!("{inst}.{}", t.name);
        }
    };
    let ctor = |c: &mut Ident| {
        if ctors.contains(&c.name) {
            c.name = format!("{inst}.{}", c.name);
        }
    };
    let names = Rename { rel: &rel, ctor: &ctor };
    items
        .into_iter()
        .map(|mut it| {
            match &mut it {
                SItem::Decl(d) => {
                    rel(&mut d.name);
                    d.attrs.iter_mut().for_each(|(_, t)| ty(t));
                }
                SItem::Type(t) => {
                    ty(&mut t.name);
                    match &mut t.def {
                        STypeDef::Union(parts) => parts.iter_mut().for_each(ty),
                        STypeDef::Record(fields) => fields.iter_mut().for_each(|(_, p)| ty(p)),
                        STypeDef::Adt(branches) => branches.iter_mut().for_each(|(b, fs)| {
                            ctor(b);
                            fs.iter_mut().for_each(|(_, p)| ty(p))
                        }),
                    }
                }
                SItem::Io(io) => rel(&mut io.rel),
                SItem::Clause(c) => {
                    c.heads.iter_mut().for_each(|h| atom(h, &names));
                    if let Some(b) = &mut c.body {
                        body(b, &names);
                    }
                }
                SItem::Comp(_) | SItem::Init(_) | SItem::Override(_) => {}
            }
            it
        })
        .collect()
}

/// How the names of an instance's relations and branch constructors are qualified.
struct Rename<'a> {
    rel: &'a dyn Fn(&mut Ident),
    ctor: &'a dyn Fn(&mut Ident),
}

fn atom(a: &mut SAtom, rel: &Rename) {
    (rel.rel)(&mut a.rel);
    a.args.iter_mut().for_each(|e| expr(e, rel));
}

fn body(b: &mut SBody, rel: &Rename) {
    match b {
        SBody::Or(ps, _) | SBody::And(ps, _) => ps.iter_mut().for_each(|p| body(p, rel)),
        SBody::Not(p, _) => body(p, rel),
        SBody::Atom(a) => atom(a, rel),
        SBody::Cmp(_, x, y, _) => {
            expr(x, rel);
            expr(y, rel);
        }
        SBody::Bool(..) => {}
    }
}

fn expr(e: &mut SExpr, rel: &Rename) {
    match &mut e.kind {
        SExprKind::Unary(_, _, x) => expr(x, rel),
        SExprKind::Bin(_, _, x, y) => {
            expr(x, rel);
            expr(y, rel);
        }
        SExprKind::Call(_, args) | SExprKind::Record(args) => args.iter_mut().for_each(|a| expr(a, rel)),
        SExprKind::Ctor(name, args) => {
            (rel.ctor)(name);
            args.iter_mut().for_each(|a| expr(a, rel))
        }
        SExprKind::Agg(_, target, b) => {
            if let Some(t) = target {
                expr(t, rel);
            }
            body(b, rel);
        }
        SExprKind::Var(_)
        | SExprKind::Anon
        | SExprKind::Int(_)
        | SExprKind::Unsigned(_)
        | SExprKind::Float(_)
        | SExprKind::Str(_)
        | SExprKind::Unsupported(_) => {}
    }
}
