//! `_core.SymbolHandle`: the graph behind `rsmx.symbol.Symbol`.

use super::errors::{guard, IntoPy};
use crate::dtype::DType;
use crate::error::Error;
use crate::graph::infer::{declares_unknown_size, infer_shapes_reading_zero, infer_types};
use crate::graph::{compose, json, listed_attrs, IndexedGraph, Symbol};
use crate::op::Attrs;
use crate::shape::Shape;
use pyo3::prelude::*;
use std::collections::HashMap;

/// A symbol: outputs of a graph of operator and variable nodes.
#[pyclass(name = "SymbolHandle", module = "rsmx._core", frozen)]
pub struct PySymbol {
    pub inner: Symbol,
}

fn wrap(s: Symbol) -> PySymbol {
    PySymbol { inner: s }
}

/// What is known of each argument, output and auxiliary state, in `list_*` order.
type ByList<T> = (Vec<Option<T>>, Vec<Option<T>>, Vec<Option<T>>);

/// Per entry of `g`, the variable node names that feed it, for known-value lookup.
fn variable_entries(g: &IndexedGraph) -> HashMap<String, usize> {
    g.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.is_variable())
        .map(|(i, n)| (n.name.clone(), g.entry_base[i]))
        .collect()
}

impl PySymbol {
    /// The entry of the variable `name`, or an error naming the symbol's inputs.
    fn input_entry(
        &self,
        vars: &HashMap<String, usize>,
        name: &str,
        what: &str,
    ) -> PyResult<usize> {
        vars.get(name)
            .copied()
            .ok_or_else(|| {
                Error::Value(format!(
                    "{what}: '{name}' is not an input of the symbol; its inputs are {}",
                    self.inner.list_inputs().join(", ")
                ))
            })
            .py()
    }

    /// What `slots` (per entry of `g`) holds for the arguments, the outputs and the
    /// auxiliary states, each converted by `f`.
    fn by_list<T, U>(
        &self,
        g: &IndexedGraph,
        vars: &HashMap<String, usize>,
        slots: &[Option<T>],
        f: impl Fn(&T) -> U,
    ) -> ByList<U> {
        let (args, aux) = self.lists();
        let at = |e: usize| slots[e].as_ref().map(&f);
        let pick = |names: &[String]| names.iter().map(|n| at(vars[n])).collect();
        (
            pick(&args),
            g.outputs.iter().map(|&e| at(e)).collect(),
            pick(&aux),
        )
    }

    fn lists(&self) -> (Vec<String>, Vec<String>) {
        (
            self.inner.list_arguments(),
            self.inner.list_auxiliary_states(),
        )
    }
}

#[pymethods]
impl PySymbol {
    /// A variable.
    #[staticmethod]
    fn variable(name: &str, attrs: Attrs) -> PyResult<PySymbol> {
        guard("Variable", || Ok(wrap(Symbol::variable(name, attrs))))
    }

    /// Operator `op` applied to positional and named inputs.
    #[staticmethod]
    fn create(
        op: &str,
        attrs: Attrs,
        args: Vec<PyRef<'_, PySymbol>>,
        kwargs: Vec<(String, PyRef<'_, PySymbol>)>,
        name: &str,
    ) -> PyResult<PySymbol> {
        guard(op, || {
            let args: Vec<Symbol> = args.iter().map(|s| s.inner.clone()).collect();
            let kwargs: Vec<(String, Symbol)> = kwargs
                .iter()
                .map(|(k, s)| (k.clone(), s.inner.clone()))
                .collect();
            compose::create(op, attrs, &args, &kwargs, name)
                .map(wrap)
                .py()
        })
    }

    /// The outputs of several symbols as one.
    #[staticmethod]
    fn group(symbols: Vec<PyRef<'_, PySymbol>>) -> PyResult<PySymbol> {
        guard("Group", || {
            let s: Vec<Symbol> = symbols.iter().map(|s| s.inner.clone()).collect();
            Ok(wrap(Symbol::group(&s)))
        })
    }

    /// Reads MXNet's JSON.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<PySymbol> {
        guard("load_json", || json::from_json(text).map(wrap).py())
    }

    /// MXNet's JSON.
    fn to_json(&self) -> PyResult<String> {
        guard("tojson", || Ok(json::to_json(&self.inner)))
    }

    fn list_arguments(&self) -> PyResult<Vec<String>> {
        guard("list_arguments", || Ok(self.inner.list_arguments()))
    }

    fn list_outputs(&self) -> PyResult<Vec<String>> {
        guard("list_outputs", || Ok(self.inner.list_outputs()))
    }

    fn list_auxiliary_states(&self) -> PyResult<Vec<String>> {
        guard("list_auxiliary_states", || {
            Ok(self.inner.list_auxiliary_states())
        })
    }

    fn list_inputs(&self) -> PyResult<Vec<String>> {
        guard("list_inputs", || Ok(self.inner.list_inputs()))
    }

    fn internals(&self) -> PyResult<PySymbol> {
        guard("get_internals", || Ok(wrap(self.inner.internals())))
    }

    /// MXNet's subgraph cut: the nodes marked with the first output's
    /// `__subgraph_name__`, outside entries made variables, and those outside entries.
    fn cut_subgraph(&self) -> PyResult<(PySymbol, Vec<PySymbol>)> {
        guard("cut_subgraph", || {
            let (sub, cut) = crate::graph::cut::cut_subgraph(&self.inner);
            Ok((wrap(sub), cut.into_iter().map(wrap).collect()))
        })
    }

    fn children(&self) -> PyResult<Option<PySymbol>> {
        guard("get_children", || Ok(self.inner.children().map(wrap)))
    }

    fn output(&self, index: usize) -> PyResult<PySymbol> {
        guard("Symbol.__getitem__", || {
            self.inner.output(index).map(wrap).py()
        })
    }

    fn num_outputs(&self) -> PyResult<usize> {
        guard("num_outputs", || Ok(self.inner.outputs.len()))
    }

    /// The single output node's name, or `None` for a group.
    fn name(&self) -> PyResult<Option<String>> {
        guard("name", || Ok(self.inner.name()))
    }

    /// Names of the distinct nodes the outputs come from, with each output's index.
    fn output_nodes(&self) -> PyResult<Vec<(String, usize, bool)>> {
        guard("output_nodes", || {
            Ok(self
                .inner
                .outputs
                .iter()
                .map(|e| (e.node.name.clone(), e.index, e.node.is_variable()))
                .collect())
        })
    }

    /// One attribute of the single output node (as stored, or by its hidden spelling).
    fn attr(&self, key: &str) -> PyResult<Option<String>> {
        guard("attr", || {
            if key == "_value_index" {
                return Ok(self.inner.value_index());
            }
            let node = self.inner.single_node("attr").py()?;
            Ok(listed_attrs(&node.attrs.read()).get(key).cloned())
        })
    }

    /// The single output node's attributes as `list_attr` shows them.
    fn list_attr(&self) -> PyResult<Attrs> {
        guard("list_attr", || {
            let node = self.inner.single_node("list_attr").py()?;
            Ok(listed_attrs(&node.attrs.read()))
        })
    }

    fn attr_dict(&self) -> PyResult<Vec<(String, Attrs)>> {
        guard("attr_dict", || Ok(self.inner.attr_dict()))
    }

    fn set_attr(&self, key: &str, value: &str) -> PyResult<()> {
        guard("_set_attr", || {
            self.inner.set_attr(key, value);
            Ok(())
        })
    }

    /// The operator of the single output node, or `null` for a variable.
    fn op_name(&self) -> PyResult<&'static str> {
        guard("op name", || {
            Ok(self.inner.single_node("op name").py()?.op_name())
        })
    }

    /// Replaces variables by other symbols (positionally in argument order, or by name).
    fn compose(
        &self,
        args: Vec<PyRef<'_, PySymbol>>,
        kwargs: Vec<(String, PyRef<'_, PySymbol>)>,
    ) -> PyResult<PySymbol> {
        guard("compose", || {
            let args: Vec<Symbol> = args.iter().map(|s| s.inner.clone()).collect();
            let kwargs: Vec<(String, Symbol)> = kwargs
                .iter()
                .map(|(k, s)| (k.clone(), s.inner.clone()))
                .collect();
            compose::compose(&self.inner, &args, &kwargs).map(wrap).py()
        })
    }

    /// `(argument, output, auxiliary)` shapes from known input shapes by name; unknown
    /// ones are `None`. In MXNet's legacy semantics a dimension of 0 is an unknown size;
    /// under NumPy shape semantics (`np_shape`) 0 is an empty axis and -1 an unknown
    /// size, in what is given and in what comes back.
    fn infer_shape(
        &self,
        known: HashMap<String, Vec<i64>>,
        np_shape: bool,
    ) -> PyResult<ByList<Vec<i64>>> {
        guard("infer_shape", || {
            let g = IndexedGraph::new(&self.inner.outputs);
            let vars = variable_entries(&g);
            let mut shapes: Vec<Option<Shape>> = vec![None; g.num_entries()];
            for (name, s) in &known {
                let e = self.input_entry(&vars, name, "infer_shape")?;
                // `()` is an unknown shape in the legacy semantics.
                if np_shape || !s.is_empty() {
                    shapes[e] = Some(s.iter().map(|&d| d.max(0) as usize).collect());
                }
            }
            // Under NumPy semantics, sizes are unknown only where -1 says so; then 0
            // stands for them inside inference.
            let zero_is_unknown = !np_shape
                || known.values().flatten().any(|&d| d < 0)
                || g.nodes
                    .iter()
                    .any(|n| n.is_variable() && declares_unknown_size(n.attr("__shape__")));
            infer_shapes_reading_zero(&g, &mut shapes, zero_is_unknown).py()?;
            let unknown_size = if np_shape && zero_is_unknown { -1 } else { 0 };
            Ok(self.by_list(&g, &vars, &shapes, |s| {
                s.iter()
                    .map(|&d| if d == 0 { unknown_size } else { d as i64 })
                    .collect()
            }))
        })
    }

    /// `(argument, output, auxiliary)` dtype flags from known input dtypes by name.
    fn infer_type(&self, known: HashMap<String, i32>) -> PyResult<ByList<i32>> {
        guard("infer_type", || {
            let g = IndexedGraph::new(&self.inner.outputs);
            let vars = variable_entries(&g);
            let mut types: Vec<Option<DType>> = vec![None; g.num_entries()];
            for (name, flag) in &known {
                let e = self.input_entry(&vars, name, "infer_type")?;
                types[e] = Some(DType::from_flag(*flag).py()?);
            }
            infer_types(&g, &mut types).py()?;
            Ok(self.by_list(&g, &vars, &types, |t| t.flag()))
        })
    }
}
