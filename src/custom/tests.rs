//! Custom operators defined in Rust, run through the engine as Python ones are.

use super::*;
use crate::engine::{self, PushSpec};
use crate::executor::{bind, BindArgs};
use crate::graph::{compose, Symbol};
use crate::op::testutil::{array, attrs, build, values};
use crate::op::Grad;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `double`: out = 2 * data, pushed as an ordinary op on the arrays it is given.
/// `fails`: forward returns an error. `bad_push`: forward pushes an op that fails.
/// `counted`: as `double`, counting the instances made.
struct TestProp {
    kind: String,
    args: Vec<String>,
    outs: Vec<String>,
    deps: Vec<usize>,
}

static CREATED: AtomicUsize = AtomicUsize::new(0);

struct TestProvider;

impl Provider for TestProvider {
    fn create(&self, op_type: &str, _kwargs: &[(String, String)]) -> Result<Arc<dyn CustomProp>> {
        if !["double", "fails", "bad_push", "counted"].contains(&op_type) {
            return Err(Error::Value(format!(
                "Cannot find custom operator {op_type}"
            )));
        }
        Ok(Arc::new(TestProp {
            kind: op_type.to_string(),
            args: vec!["data".into()],
            outs: vec!["output".into()],
            // Only the output gradient: the gradient of 2x needs nothing else.
            deps: vec![0],
        }))
    }
}

impl CustomProp for TestProp {
    fn arguments(&self) -> &[String] {
        &self.args
    }
    fn outputs(&self) -> &[String] {
        &self.outs
    }
    fn aux_states(&self) -> &[String] {
        &[]
    }
    fn backward_deps(&self) -> &[usize] {
        &self.deps
    }
    fn infer_shape(&self, args: &[Option<Shape>]) -> Result<Inferred<Option<Shape>>> {
        Ok(Inferred {
            args: args.to_vec(),
            outputs: vec![args[0].clone()],
            aux: vec![],
        })
    }
    fn infer_type(&self, args: &[Option<DType>]) -> Result<Inferred<Option<DType>>> {
        Ok(Inferred {
            args: args.to_vec(),
            outputs: vec![args[0]],
            aux: vec![],
        })
    }
    fn create_operator(
        &self,
        _: Context,
        _: &[Shape],
        _: &[DType],
    ) -> Result<Arc<dyn CustomInstance>> {
        CREATED.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(TestInstance {
            kind: self.kind.clone(),
        }))
    }
}

struct TestInstance {
    kind: String,
}

fn times_two(src: &NDArray, dst: &NDArray) -> Result<()> {
    let op = build("_mul_scalar", &[("scalar", "2")]);
    crate::imperative::invoke(
        &op,
        std::slice::from_ref(src),
        Some(vec![dst.clone()]),
        None,
        false,
    )?;
    Ok(())
}

impl CustomInstance for TestInstance {
    fn forward(&self, call: ForwardCall) -> Result<()> {
        match self.kind.as_str() {
            "fails" => Err(Error::Runtime("forward failed on purpose".into())),
            "bad_push" => {
                engine::get().push_sync(
                    Box::new(|_| Err(Error::Runtime("a pushed op failed".into()))),
                    PushSpec::new("failing", call.ctx, &[], &[call.out_data[0].var().clone()]),
                );
                Ok(())
            }
            _ => times_two(&call.in_data[0], &call.out_data[0]),
        }
    }

    fn backward(&self, call: BackwardCall) -> Result<()> {
        assert!(call.in_data[0].is_none() && call.out_data[0].is_none());
        times_two(call.out_grad[0].as_ref().unwrap(), &call.in_grad[0])
    }
}

fn setup() {
    set_provider(Box::new(TestProvider));
}

fn custom(kind: &str) -> crate::op::OpRef {
    setup();
    build("Custom", &[("op_type", kind)])
}

#[test]
fn forward_runs_the_user_code_and_completes_after_its_ops() {
    let op = custom("double");
    let x = array(&[4], &[1.0f32, 2.0, 3.0, 4.0]);
    let op = crate::imperative::instantiate(&op, std::slice::from_ref(&x), None).unwrap();
    let y = crate::imperative::invoke(&op, &[x], None, None, false).unwrap();
    assert_eq!(values::<f32>(&y[0]), vec![2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn chained_custom_ops_wait_for_each_other() {
    let op = custom("double");
    let mut x = array(&[3], &[1.0f32, -1.0, 0.5]);
    for _ in 0..20 {
        x = crate::imperative::invoke(&op, &[x], None, None, false)
            .unwrap()
            .remove(0);
    }
    let m = (1u32 << 20) as f32;
    assert_eq!(values::<f32>(&x), vec![m, -m, m / 2.0]);
}

#[test]
fn backward_shares_the_instance_and_reads_only_its_dependencies() {
    let op = custom("double");
    let x = array(&[2], &[5.0f32, 6.0]);
    let inst = crate::imperative::instantiate(&op, std::slice::from_ref(&x), None).unwrap();
    let Grad::Op(g) = inst.gradient() else {
        panic!("Custom has a backward operator")
    };
    assert_eq!(
        (g.ograds.clone(), g.inputs.clone(), g.outputs.clone()),
        (vec![0], vec![], vec![])
    );
    let head = array(&[2], &[1.0f32, 3.0]);
    let dx = NDArray::empty(&[2], DType::F32, Context::cpu(0)).unwrap();
    let out =
        crate::imperative::invoke_into(&g.op, &[head], vec![dx], Context::cpu(0), true).unwrap();
    assert_eq!(values::<f32>(&out[0]), vec![2.0, 6.0]);
}

#[test]
fn an_error_in_the_user_code_surfaces_at_the_next_wait_and_the_engine_goes_on() {
    let op = custom("fails");
    let x = array(&[2], &[1.0f32, 2.0]);
    let y = crate::imperative::invoke(&op, std::slice::from_ref(&x), None, None, false).unwrap();
    let e = y[0].wait_to_read().unwrap_err();
    assert!(e.to_string().contains("forward failed on purpose"), "{e}");
    let ok = crate::imperative::invoke(&custom("double"), &[x], None, None, false).unwrap();
    assert_eq!(values::<f32>(&ok[0]), vec![2.0, 4.0]);
}

#[test]
fn an_error_in_an_op_the_user_code_pushed_fails_the_custom_op_once() {
    let op = custom("bad_push");
    let x = array(&[2], &[1.0f32, 2.0]);
    let y = crate::imperative::invoke(&op, &[x], None, None, false).unwrap();
    let e = y[0].wait_to_read().unwrap_err();
    assert!(e.to_string().contains("a pushed op failed"), "{e}");
    assert!(y[0].wait_to_read().is_ok(), "an error is raised once");
}

#[test]
fn an_unknown_op_type_is_an_error_naming_it() {
    setup();
    let e = crate::op::find("Custom")
        .unwrap()
        .build(&attrs(&[("op_type", "nope")]))
        .err()
        .unwrap();
    assert!(e.to_string().contains("nope"), "{e}");
    let e = crate::op::find("Custom")
        .unwrap()
        .build(&attrs(&[]))
        .err()
        .unwrap();
    assert!(e.to_string().contains("op_type"), "{e}");
}

#[test]
fn an_executor_gives_each_node_an_instance_and_never_bulks_them() {
    setup();
    let data = Symbol::variable("data", Default::default());
    let a = compose::create(
        "Custom",
        attrs(&[("op_type", "counted")]),
        &[data],
        &[],
        "a",
    )
    .unwrap();
    let b = compose::create("Custom", attrs(&[("op_type", "counted")]), &[a], &[], "b").unwrap();
    let before = CREATED.load(Ordering::SeqCst);
    let x = array(&[3], &[1.0f32, 2.0, 3.0]);
    let dx = NDArray::empty(&[3], DType::F32, Context::cpu(0)).unwrap();
    let ex = bind(
        &b,
        BindArgs {
            ctx: Context::cpu(0),
            args: vec![x],
            grads: vec![Some(dx.clone())],
            grad_reqs: vec![crate::op::OpReq::Write],
            aux: vec![],
            group2ctx: HashMap::new(),
        },
        None,
    )
    .unwrap();
    assert!(
        CREATED.load(Ordering::SeqCst) - before >= 2,
        "one instance per node"
    );
    for _ in 0..3 {
        ex.forward(true).unwrap();
        ex.backward(&[Some(array(&[3], &[1.0f32, 1.0, 1.0]))], true)
            .unwrap();
    }
    assert_eq!(values::<f32>(&ex.outputs[0]), vec![4.0, 8.0, 12.0]);
    assert_eq!(values::<f32>(&dx), vec![4.0, 4.0, 4.0]);
}
