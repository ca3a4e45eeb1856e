//! MXNet's control-flow operators (`_foreach`, `_while_loop`, `_cond`): nodes holding
//! subgraphs, which the front end runs through the custom-operator seam.
//!
//! A node keeps its subgraphs as MXNet's symbol JSON in the attribute
//! [`SUBGRAPHS_KEY`] (a JSON list); the symbol JSON writes them under the node's
//! `subgraphs` key, as MXNet does, and reads them back from it.

use super::op::CustomOp;
use super::provider;
use crate::error::{Error, Result};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use std::sync::Arc;

/// The attribute holding a control-flow node's subgraphs (a JSON list of symbol JSON).
pub const SUBGRAPHS_KEY: &str = "__subgraphs__";

const NUM_ARGS: Param = Param::required(
    "num_args",
    "int",
    "Number of inputs, the subgraphs counted as MXNet counts them.",
);
const NUM_OUTPUTS: Param = Param::required("num_outputs", "int", "The number of outputs.");
const NUM_OUT_DATA: Param = Param::required(
    "num_out_data",
    "int",
    "The number of outputs stacked over the iterations (the others are the loop states).",
);

const FOREACH: &[Param] = &[
    NUM_ARGS,
    NUM_OUTPUTS,
    NUM_OUT_DATA,
    Param::required(
        "in_state_locs",
        "tuple of <long>",
        "The positions of the loop states among the subgraph's inputs.",
    ),
    Param::required(
        "in_data_locs",
        "tuple of <long>",
        "The positions of the sliced data among the subgraph's inputs.",
    ),
    Param::required(
        "remain_locs",
        "tuple of <long>",
        "The positions of the other inputs among the subgraph's inputs.",
    ),
];

const WHILE_LOOP: &[Param] = &[
    NUM_ARGS,
    NUM_OUTPUTS,
    NUM_OUT_DATA,
    Param::required(
        "max_iterations",
        "int",
        "Maximum number of iterations; the stacked outputs have this many rows.",
    ),
    Param::required(
        "cond_input_locs",
        "tuple of <long>",
        "The node input feeding each input of the condition's subgraph.",
    ),
    Param::required(
        "func_input_locs",
        "tuple of <long>",
        "The node input feeding each input of the body's subgraph.",
    ),
    Param::required(
        "func_var_locs",
        "tuple of <long>",
        "The position of each loop variable among the body's subgraph inputs.",
    ),
];

const COND: &[Param] = &[
    NUM_ARGS,
    NUM_OUTPUTS,
    Param::required(
        "cond_input_locs",
        "tuple of <long>",
        "The node input feeding each input of the predicate's subgraph.",
    ),
    Param::required(
        "then_input_locs",
        "tuple of <long>",
        "The node input feeding each input of the then-branch's subgraph.",
    ),
    Param::required(
        "else_input_locs",
        "tuple of <long>",
        "The node input feeding each input of the else-branch's subgraph.",
    ),
];

/// Adds `_foreach`, `_while_loop` and `_cond` to the registry.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "_foreach",
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: FOREACH,
        doc: "Run a for loop over an NDArray with user-defined computation (a subgraph); \
              made by mx.sym.contrib.foreach.",
        create: Box::new(|a| create("_foreach", FOREACH, a, 1)),
    });
    r.add(OpDef {
        name: "_while_loop",
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: WHILE_LOOP,
        doc: "Run a while loop over with user-defined condition and computation \
              (subgraphs); made by mx.sym.contrib.while_loop.",
        create: Box::new(|a| create("_while_loop", WHILE_LOOP, a, 2)),
    });
    r.add(OpDef {
        name: "_cond",
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: COND,
        doc: "Run an if-then-else using user-defined condition and computation \
              (subgraphs); made by mx.sym.contrib.cond.",
        create: Box::new(|a| create("_cond", COND, a, 3)),
    });
}

/// Checks the attributes, then asks the front end for the operator's properties, giving
/// it the declared attributes and the subgraphs (as `subgraphs`).
fn create(name: &'static str, decls: &[Param], attrs: &Attrs, graphs: usize) -> Result<OpRef> {
    let p = Params::declared(name, attrs, decls)?;
    for d in decls {
        if d.ty == "int" {
            p.get::<i64>(d.name)?;
        } else {
            p.get::<Vec<i64>>(d.name)?;
        }
    }
    let subgraphs = attrs.get(SUBGRAPHS_KEY).ok_or_else(|| {
        Error::Value(format!(
            "{name}: the node holds no subgraph; make it with mx.sym.contrib.{}",
            name.trim_start_matches('_')
        ))
    })?;
    let count = serde_json::from_str::<Vec<serde_json::Value>>(subgraphs)
        .map_err(|e| Error::Value(format!("{name}: its subgraphs are not a JSON list: {e}")))?
        .len();
    if count != graphs {
        return Err(Error::Value(format!(
            "{name}: takes {graphs} subgraph(s), the node holds {count}"
        )));
    }
    let mut kwargs: Vec<(String, String)> = decls
        .iter()
        .filter_map(|d| attrs.get(d.name).map(|v| (d.name.to_string(), v.clone())))
        .collect();
    kwargs.push(("subgraphs".into(), subgraphs.clone()));
    let prop = provider()?.create(name, &kwargs)?;
    Ok(Arc::new(CustomOp::new(name, name, prop)))
}
