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
    /// The attributes the op takes, each declared once (type, default, description).
    pub params: &'static [Param],
    /// One-line description.
    pub doc: &'static str,
    /// Builds the op from its attributes.
    pub create: Creator,
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
    pub fn params_of(&self, name: &str) -> Option<&'static [Param]> {
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
        super::array_info::register(&mut r);
        super::reduce::register(&mut r);
        super::cumsum::register(&mut r);
        super::histogram::register(&mut r);
        super::khatri_rao::register(&mut r);
        super::crop::register(&mut r);
        super::linalg::register(&mut r);
        super::transform::register(&mut r);
        super::indexing::register(&mut r);
        super::sorting::register(&mut r);
        super::contrib::register(&mut r);
        super::la::register(&mut r);
        super::la_factor::register(&mut r);
        super::la_trian::register(&mut r);
        super::attention::register(&mut r);
        super::random::register(&mut r);
        super::random_pdf::register(&mut r);
        super::nn::register(&mut r);
        super::optim::register(&mut r);
        super::grad::register(&mut r);
        crate::custom::register(&mut r);
        crate::custom::control_flow::register(&mut r);
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
    /// The attribute names, in order.
    pub fn param_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.params.iter().map(|p| p.name)
    }

    /// Builds the operator from attributes, with the op's name in any error. Attributes
    /// are checked once, by the creator: it reads them through
    /// [`super::Params::declared`] with the same declarations, which rejects unknown
    /// names (a test holds every registered operator to this).
    pub fn build(&self, attrs: &Attrs) -> Result<OpRef> {
        (self.create)(attrs).map_err(|e| e.in_op(self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::list_ops;
    use crate::op::Attrs;

    #[test]
    fn every_operator_declares_its_attributes_in_full() {
        assert!(list_ops().len() > 300, "{} operators", list_ops().len());
        for def in list_ops() {
            let decls = def.params;
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
    /// operator must reject one it does not take.
    #[test]
    fn every_operator_rejects_unknown_attributes() {
        let attrs: Attrs = [("no_such_argument".to_string(), "1".to_string())].into();
        // `Custom` passes its attributes to the user's property class, which checks them.
        for def in list_ops().iter().filter(|d| d.name != "Custom") {
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
        }
    }
}
