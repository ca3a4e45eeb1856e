//! The table of operator definitions, filled once from every operator family.

use super::params::Param;
use super::{Attrs, OpRef};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Builds an operator from its attributes.
pub type Creator = Box<dyn Fn(&Attrs) -> Result<OpRef> + Send + Sync>;

/// One registered operator: names, inputs, and how to build it from attributes.
pub struct OpDef {
    /// MXNet's name.
    pub name: &'static str,
    /// Other names MXNet accepts.
    pub aliases: &'static [&'static str],
    /// Names of the inputs, in order (`data`, `lhs`, `rhs`, ...).
    pub inputs: &'static [&'static str],
    /// True if the op takes any number of inputs (given by `num_args`).
    pub variadic: bool,
    /// The attributes the op takes.
    pub params: ParamList,
    /// One-line description.
    pub doc: &'static str,
    /// Builds the op from its attributes.
    pub create: Creator,
}

/// The attributes an operator takes.
#[derive(Debug, Clone, Copy)]
pub enum ParamList {
    /// Declared in full (type, default, doc): the form every operator moves to.
    Declared(&'static [Param]),
    /// Names only, for operators whose attributes are not declared in full yet.
    Names(&'static [&'static str]),
}

impl ParamList {
    /// The attribute names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        match self {
            ParamList::Declared(d) => d.iter().map(|p| p.name).collect(),
            ParamList::Names(n) => n.to_vec(),
        }
    }

    /// The full declarations (empty for `Names`).
    pub fn declared(&self) -> &'static [Param] {
        match self {
            ParamList::Declared(d) => d,
            ParamList::Names(_) => &[],
        }
    }
}

/// A set of definitions under construction.
#[derive(Default)]
pub struct Registry {
    defs: Vec<OpDef>,
}

impl Registry {
    /// Adds a definition.
    pub fn add(&mut self, def: OpDef) {
        self.defs.push(def);
    }

    /// The attributes of an operator added so far.
    pub fn params_of(&self, name: &str) -> Option<ParamList> {
        self.defs.iter().find(|d| d.name == name).map(|d| d.params)
    }
}

struct Table {
    defs: Vec<&'static OpDef>,
    by_name: HashMap<&'static str, &'static OpDef>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut r = Registry::default();
        super::elemwise::add_n::register(&mut r);
        super::elemwise::unary::register(&mut r);
        super::elemwise::binary::register(&mut r);
        super::init::register(&mut r);
        super::reduce::register(&mut r);
        super::linalg::register(&mut r);
        super::transform::register(&mut r);
        super::indexing::register(&mut r);
        super::sorting::register(&mut r);
        super::random::register(&mut r);
        super::nn::register(&mut r);
        super::optim::register(&mut r);
        super::grad::register(&mut r);
        let mut defs = Vec::new();
        let mut by_name = HashMap::new();
        for def in r.defs {
            let def: &'static OpDef = Box::leak(Box::new(def));
            for n in std::iter::once(&def.name).chain(def.aliases.iter()) {
                assert!(
                    by_name.insert(*n, def).is_none(),
                    "operator name {n} registered twice"
                );
            }
            defs.push(def);
        }
        Table { defs, by_name }
    })
}

/// The definition registered under `name` (or an alias).
pub fn find(name: &str) -> Result<&'static OpDef> {
    table()
        .by_name
        .get(name)
        .copied()
        .ok_or_else(|| Error::Value(format!("unknown operator '{name}'")))
}

/// Every registered definition, in registration order.
pub fn list_ops() -> &'static [&'static OpDef] {
    &table().defs
}

impl OpDef {
    /// Builds the operator from attributes, with the op's name in any error. Attributes
    /// are checked once, by the creator: a `Declared` operator's creator reads them
    /// through [`super::Params::declared`] with the same declarations, which rejects
    /// unknown names (a test holds every registered operator to this).
    pub fn build(&self, attrs: &Attrs) -> Result<OpRef> {
        (self.create)(attrs).map_err(|e| e.in_op(self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::{list_ops, ParamList, Registry};
    use crate::op::Attrs;

    /// The operator families whose attributes are declared in full: each one's
    /// registration, run into a registry of its own. (nn joins this list once its
    /// operators are declared.)
    type Register = fn(&mut Registry);

    const DECLARED_FAMILIES: &[(&str, Register)] = &[
        ("add_n", super::super::elemwise::add_n::register),
        ("unary", super::super::elemwise::unary::register),
        ("binary", super::super::elemwise::binary::register),
        ("init", super::super::init::register),
        ("reduce", super::super::reduce::register),
        ("linalg", super::super::linalg::register),
        ("transform", super::super::transform::register),
        ("indexing", super::super::indexing::register),
        ("sorting", super::super::sorting::register),
        ("random", super::super::random::register),
        ("optim", super::super::optim::register),
    ];

    #[test]
    fn every_family_outside_nn_declares_its_attributes() {
        let mut r = Registry::default();
        for (_, register) in DECLARED_FAMILIES {
            register(&mut r);
        }
        // The backward operators of these families take their forward's declarations.
        super::super::grad::register(&mut r);
        assert!(r.defs.len() > 200, "{} operators", r.defs.len());
        for def in &r.defs {
            let ParamList::Declared(decls) = def.params else {
                panic!("{}: attributes are listed by name only", def.name);
            };
            for (i, p) in decls.iter().enumerate() {
                assert!(!p.ty.is_empty(), "{}.{}: no type", def.name, p.name);
                assert!(!p.doc.is_empty(), "{}.{}: no description", def.name, p.name);
                assert!(
                    decls[..i].iter().all(|q| q.name != p.name),
                    "{}.{}: declared twice",
                    def.name,
                    p.name
                );
            }
        }
    }

    /// `OpDef::build` leaves the check of attribute names to the creator, so every
    /// operator declared in full must reject one it does not take.
    #[test]
    fn declared_operators_reject_unknown_attributes() {
        let attrs: Attrs = [("no_such_argument".to_string(), "1".to_string())].into();
        let mut checked = 0;
        for def in list_ops() {
            if let ParamList::Declared(_) = def.params {
                let e = def
                    .build(&attrs)
                    .err()
                    .unwrap_or_else(|| panic!("{}: accepted an unknown attribute", def.name));
                assert!(
                    e.to_string()
                        .contains("unknown argument 'no_such_argument'"),
                    "{}: {e}",
                    def.name
                );
                checked += 1;
            }
        }
        assert!(checked > 200, "{checked} operators checked");
    }
}
