use super::*;
use crate::op::testutil::{build, f32a, f32s};

/// A variable over `data` with a zeroed gradient buffer.
fn variable(data: &[f32], req: GradReq) -> Value {
    let a = f32a(&[data.len()], data);
    let g = f32a(&[data.len()], &vec![0.0; data.len()]);
    let e = mark_variable(&a, g, req).unwrap();
    (a, Some(e))
}

/// Runs and records `name` on `inputs` with `attrs`, as `mx.nd.<name>` does; all outputs.
fn op(name: &str, attrs: &[(&str, &str)], inputs: &[&Value]) -> Vec<Value> {
    let inputs: Vec<Value> = inputs.iter().map(|v| (*v).clone()).collect();
    invoke(&build(name, attrs), &inputs, None, None, false).unwrap()
}

fn one(name: &str, attrs: &[(&str, &str)], inputs: &[&Value]) -> Value {
    op(name, attrs, inputs).swap_remove(0)
}

/// The error of a call that must fail.
fn failure<T>(r: Result<T>) -> Error {
    match r {
        Ok(_) => panic!("the call succeeded"),
        Err(e) => e,
    }
}

fn head(v: &Value) -> Head {
    Head {
        value: v.clone(),
        grad: None,
    }
}

fn grad_of(v: &Value) -> Vec<f32> {
    f32s(&v.1.as_ref().unwrap().grad().unwrap())
}

/// Sets recording and training for the scope of a test thread.
fn recording() {
    set_recording(true);
    set_training(true);
}

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{a:?} vs {b:?}");
    }
}

#[test]
fn gradients_sum_over_every_path_to_a_variable() {
    recording();
    let x = variable(&[1.0, 2.0, -0.5], GradReq::Write);
    // y = x * x + exp(x) + x
    let sq = one("elemwise_mul", &[], &[&x, &x]);
    let e = one("exp", &[], &[&x]);
    let s = one("elemwise_add", &[], &[&sq, &e]);
    let y = one("elemwise_add", &[], &[&s, &x]);
    set_recording(false);
    backward(&[head(&y)], None, false, false, true).unwrap();
    let want: Vec<f32> = [1.0f32, 2.0, -0.5]
        .iter()
        .map(|v| 2.0 * v + v.exp() + 1.0)
        .collect();
    close(&grad_of(&x), &want);
}

#[test]
fn nothing_is_recorded_outside_a_record_scope() {
    set_recording(false);
    let x = variable(&[1.0], GradReq::Write);
    let y = one("exp", &[], &[&x]);
    assert!(y.1.is_none());
    let err = failure(backward(&[head(&y)], None, false, false, true));
    assert!(
        err.to_string().contains("not in a computational graph"),
        "{err}"
    );
}

#[test]
fn a_released_graph_cannot_be_differentiated_again_unless_retained() {
    recording();
    let x = variable(&[3.0], GradReq::Add);
    let y = one("_mul_scalar", &[("scalar", "2")], &[&x]);
    set_recording(false);
    backward(&[head(&y)], None, true, false, true).unwrap();
    backward(&[head(&y)], None, false, false, true).unwrap();
    // Added twice.
    assert_eq!(grad_of(&x), vec![4.0]);
    let err = failure(backward(&[head(&y)], None, false, false, true));
    assert!(err.to_string().contains("retain_graph=True"), "{err}");
}

#[test]
fn grad_returns_gradients_and_leaves_the_buffers_alone() {
    recording();
    let x = variable(&[1.0, 2.0], GradReq::Write);
    let unused = variable(&[5.0], GradReq::Write);
    let y = one("square", &[], &[&x]);
    set_recording(false);
    let g = backward(
        &[head(&y)],
        Some(&[x.clone(), unused.clone()]),
        false,
        false,
        true,
    )
    .unwrap();
    assert_eq!(f32s(&g[0].0), vec![2.0, 4.0]);
    assert_eq!(f32s(&g[1].0), vec![0.0]);
    assert_eq!(grad_of(&x), vec![0.0, 0.0]);
}

#[test]
fn create_graph_records_the_backward_ops() {
    recording();
    let x = variable(&[2.0], GradReq::Write);
    let y = one("_mul_scalar", &[("scalar", "3")], &[&x]);
    let z = one("elemwise_mul", &[], &[&y, &x]); // z = 3x², dz/dx = 6x
    set_recording(false);
    let dx = backward(
        &[head(&z)],
        Some(std::slice::from_ref(&x)),
        true,
        true,
        true,
    )
    .unwrap();
    assert_eq!(f32s(&dx[0].0), vec![12.0]);
    assert!(dx[0].1.is_some(), "the gradient is in a graph");
    assert!(!is_recording(), "recording is restored");
    backward(&[head(&dx[0])], None, false, false, true).unwrap();
    assert_eq!(grad_of(&x), vec![6.0]);
}

#[test]
fn a_backward_operator_without_a_gradient_of_its_own_is_a_clear_error_at_second_order() {
    recording();
    let x = (f32a(&[1, 2], &[1.0, 2.0]), None);
    let w = variable(&[3.0, 4.0], GradReq::Write);
    let w2 = one("Reshape", &[("shape", "(1, 2)")], &[&w]);
    let y = one(
        "FullyConnected",
        &[("num_hidden", "1"), ("no_bias", "True")],
        &[&x, &w2],
    );
    let z = one("square", &[], &[&y]);
    set_recording(false);
    let dw = backward(
        &[head(&z)],
        Some(std::slice::from_ref(&w)),
        true,
        true,
        true,
    )
    .unwrap();
    // dz/dw = 2 (x·w) x = 2 · 11 · x.
    assert_eq!(f32s(&dw[0].0), vec![22.0, 44.0]);
    let err = failure(backward(&[head(&dw[0])], None, false, false, true));
    assert!(err.to_string().contains("has no gradient"), "{err}");
}

#[test]
fn the_dropout_mask_drawn_in_the_forward_pass_is_the_one_differentiated() {
    recording();
    let x = variable(&vec![1.0; 64], GradReq::Write);
    let y = one("Dropout", &[("p", "0.5")], &[&x]);
    set_recording(false);
    backward(&[head(&y)], None, false, false, true).unwrap();
    let out = f32s(&y.0);
    assert!(out.contains(&0.0) && out.contains(&2.0), "{out:?}");
    assert_eq!(grad_of(&x), out);
}

#[test]
fn a_head_gradient_scales_the_result_and_must_match_its_head() {
    recording();
    let x = variable(&[1.0, 2.0], GradReq::Write);
    let y = one("_mul_scalar", &[("scalar", "2")], &[&x]);
    set_recording(false);
    let bad = Head {
        value: y.clone(),
        grad: Some((f32a(&[3], &[1.0, 1.0, 1.0]), None)),
    };
    let err = failure(backward(&[bad], None, true, false, true));
    assert!(err.to_string().contains("head gradient"), "{err}");
    let h = Head {
        value: y,
        grad: Some((f32a(&[2], &[10.0, 100.0]), None)),
    };
    backward(&[h], None, false, false, true).unwrap();
    assert_eq!(grad_of(&x), vec![20.0, 200.0]);
}

#[test]
fn a_graph_without_marked_variables_has_nothing_to_differentiate() {
    recording();
    let x = variable(&[1.0], GradReq::Null);
    let y = one("exp", &[], &[&x]);
    set_recording(false);
    let err = failure(backward(&[head(&y)], None, false, false, true));
    assert!(err.to_string().contains("require gradients"), "{err}");
}

#[test]
fn arrays_in_a_graph_cannot_be_overwritten_while_recording() {
    recording();
    let x = variable(&[1.0], GradReq::Write);
    assert!(check_writable(&[x.1.as_ref()]).is_err());
    set_recording(false);
    assert!(check_writable(&[x.1.as_ref()]).is_ok());
}

struct Doubling;

impl CustomBackward for Doubling {
    fn backward(&self, ograds: Vec<NDArray>, _: bool) -> Result<Vec<Option<NDArray>>> {
        let op = build("_mul_scalar", &[("scalar", "2")]);
        let g = crate::imperative::invoke(&op, &ograds, None, None, false)?;
        Ok(vec![Some(g[0].clone()), None])
    }
}

#[test]
fn custom_backward_computations_give_their_inputs_gradients() {
    recording();
    let x = variable(&[1.0, 2.0], GradReq::Write);
    let w = variable(&[7.0, 7.0], GradReq::Write);
    let out = f32a(&[2], &[0.0, 0.0]);
    let es = record_custom(
        Arc::new(Doubling),
        &[(&x.0, x.1.clone()), (&w.0, w.1.clone())],
        std::slice::from_ref(&out),
    )
    .unwrap();
    let y = (out, Some(es[0].clone()));
    let z = one("_mul_scalar", &[("scalar", "3")], &[&y]);
    set_recording(false);
    backward(&[head(&z)], None, false, false, true).unwrap();
    assert_eq!(grad_of(&x), vec![6.0, 6.0]);
    // No gradient reached `w`: its buffer is written with zeros.
    assert_eq!(grad_of(&w), vec![0.0, 0.0]);
}

#[test]
fn gradients_recorded_by_create_graph_can_be_differentiated_again() {
    recording();
    let v = [0.5f32, -1.0];
    let x = variable(&v, GradReq::Write);
    // z = exp(x) + x·x·x: dz/dx = exp(x) + 3x², d²z/dx² = exp(x) + 6x.
    let e = one("exp", &[], &[&x]);
    let sq = one("elemwise_mul", &[], &[&x, &x]);
    let cube = one("elemwise_mul", &[], &[&sq, &x]);
    let z = one("elemwise_add", &[], &[&e, &cube]);
    set_recording(false);
    let dx = backward(
        &[head(&z)],
        Some(std::slice::from_ref(&x)),
        true,
        true,
        true,
    )
    .unwrap();
    let want: Vec<f32> = v.iter().map(|a| a.exp() + 3.0 * a * a).collect();
    close(&f32s(&dx[0].0), &want);
    backward(&[head(&dx[0])], None, false, false, true).unwrap();
    let want: Vec<f32> = v.iter().map(|a| a.exp() + 6.0 * a).collect();
    close(&grad_of(&x), &want);
}

#[test]
fn a_very_long_recorded_chain_is_freed_without_deep_recursion() {
    recording();
    let x = variable(&[1.0], GradReq::Write);
    let op = build("_copy", &[]);
    let mut v = x.clone();
    for _ in 0..300_000 {
        let e = record_op(&op, &[(&v.0, v.1.clone())], std::slice::from_ref(&v.0)).unwrap();
        v = (v.0.clone(), Some(e[0].clone()));
    }
    set_recording(false);
    drop(v);
}
