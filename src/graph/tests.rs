//! Unit tests of the graph passes: composition, JSON, inference, gradient and planning.

use super::compose::create;
use super::gradient;
use super::infer::{infer_shapes, infer_types};
use super::json::{from_json, to_json};
use super::plan::plan_memory;
use super::{IndexedGraph, Symbol};
use crate::dtype::DType;
use crate::op::Attrs;
use crate::shape::Shape;

fn attrs(kv: &[(&str, &str)]) -> Attrs {
    crate::op::testutil::attrs(kv)
}

fn var(name: &str) -> Symbol {
    Symbol::variable(name, Attrs::new())
}

fn op(name: &str, kv: &[(&str, &str)], args: &[Symbol], node: &str) -> Symbol {
    create(name, attrs(kv), args, &[], node).unwrap()
}

/// data -> FC(8) -> relu -> FC(4) -> SoftmaxOutput.
fn mlp() -> Symbol {
    let h = op(
        "FullyConnected",
        &[("num_hidden", "8")],
        &[var("data")],
        "fc1",
    );
    let h = op("Activation", &[("act_type", "relu")], &[h], "relu1");
    let h = op("FullyConnected", &[("num_hidden", "4")], &[h], "fc2");
    op("SoftmaxOutput", &[], &[h], "softmax")
}

#[test]
fn composition_creates_named_variables() {
    let s = mlp();
    assert_eq!(
        s.list_arguments(),
        [
            "data",
            "fc1_weight",
            "fc1_bias",
            "fc2_weight",
            "fc2_bias",
            "softmax_label"
        ]
    );
    assert_eq!(s.list_outputs(), ["softmax_output"]);
    let bn = op("BatchNorm", &[], &[var("x")], "bn");
    assert_eq!(
        bn.list_auxiliary_states(),
        ["bn_moving_mean", "bn_moving_var"]
    );
    assert!(create("FullyConnected", Attrs::new(), &[var("d")], &[], "f").is_err());
    assert!(create("NoSuchOp", Attrs::new(), &[], &[], "f").is_err());
}

#[test]
fn json_round_trips() {
    let s = mlp();
    let text = to_json(&s);
    let back = from_json(&text).unwrap();
    assert_eq!(to_json(&back), text);
    assert!(from_json("{").is_err());
}

#[test]
fn inference_fills_weights_and_labels() {
    let s = mlp();
    let g = IndexedGraph::new(&s.outputs);
    let mut shapes: Vec<Option<Shape>> = vec![None; g.num_entries()];
    shapes[0] = Some(Shape::from_slice(&[5, 3]));
    infer_shapes(&g, &mut shapes).unwrap();
    let shape_of = |name: &str| {
        let i = g.nodes.iter().position(|n| n.name == name).unwrap();
        shapes[g.entry_base[i]].clone().unwrap().to_vec()
    };
    assert_eq!(shape_of("fc1_weight"), [8, 3]);
    assert_eq!(shape_of("fc2_bias"), [4]);
    assert_eq!(shape_of("softmax_label"), [5]);
    assert_eq!(shape_of("softmax"), [5, 4]);
}

#[test]
fn gradient_reaches_requested_variables_only() {
    let s = mlp();
    let (_, args, _) = s.variables();
    let wrt: Vec<_> = args
        .iter()
        .filter(|n| n.name != "data" && n.name != "softmax_label")
        .cloned()
        .collect();
    let gg = gradient::build(&s.outputs, &wrt).unwrap();
    assert!(gg.grads.iter().all(|g| g.is_some()));
    // The loss output ignores its head gradient.
    assert!(gg.head_grads[0].is_none());
    // A sum's backward is passed through: the gradient of `a` in `a + b` is a copy of the
    // head gradient, not the output of a backward node.
    let a = var("a");
    let sum = op("elemwise_add", &[], &[a.clone(), var("b")], "s");
    let gg = gradient::build(&sum.outputs, &[a.outputs[0].node.clone()]).unwrap();
    let ga = gg.grads[0].as_ref().unwrap();
    assert_eq!(ga.node.op_name(), "_copy");
    assert!(ga.node.inputs[0].node.is_variable());
}

#[test]
fn gradients_take_the_dtype_of_their_own_input() {
    // take(a: float64, indices: int32): the backward node's output is a's gradient, so
    // float64, and its output gradient input is take's output, also float64.
    let a = var("a");
    let idx = var("idx");
    let t = op("take", &[], &[a.clone(), idx.clone()], "t");
    let gg = gradient::build(&t.outputs, &[a.outputs[0].node.clone()]).unwrap();
    let grad = gg.grads[0].clone().unwrap();
    let mut heads = t.outputs.clone();
    heads.push(grad.clone());
    let g = IndexedGraph::new(&heads);
    let mut types = vec![None; g.num_entries()];
    types[g.entry_of(&a.outputs[0]).unwrap()] = Some(DType::F64);
    types[g.entry_of(&idx.outputs[0]).unwrap()] = Some(DType::I32);
    infer_types(&g, &mut types).unwrap();
    assert_eq!(types[g.entry_of(&grad).unwrap()], Some(DType::F64));
    assert!(types.iter().all(|t| t.is_some()));
    let head = gg.head_grads[0].clone().unwrap();
    assert_eq!(
        types[g.entry_base[g.node_index(&head).unwrap()]],
        Some(DType::F64)
    );
}

#[test]
fn planning_reuses_and_works_in_place() {
    let s = mlp();
    let g = IndexedGraph::new(&s.outputs);
    let n = g.num_entries();
    let external: Vec<bool> = (0..n)
        .map(|e| g.nodes[g.producer(e)].is_variable())
        .collect();
    let bytes = vec![64; n];
    let plan = plan_memory(&g, &bytes, &external);
    let entry = |name: &str| {
        let i = g.nodes.iter().position(|n| n.name == name).unwrap();
        g.entry_base[i]
    };
    // relu overwrites fc1's output, which nothing else reads.
    assert!(plan.inplace[entry("relu1")]);
    assert_eq!(plan.storage[entry("relu1")], plan.storage[entry("fc1")]);
    // fc1/relu1's block is dead after fc2 and is reused for a later entry.
    assert_eq!(plan.storage[entry("softmax")], plan.storage[entry("fc1")]);
    assert!(plan.block_bytes.len() < 4);
    assert!(plan.storage[entry("data")].is_none());
}
