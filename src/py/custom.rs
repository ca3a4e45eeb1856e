//! Custom operators defined in Python: the core's [`Provider`], [`CustomProp`] and
//! [`CustomInstance`] calling the user's `CustomOpProp` and `CustomOp` through the glue
//! functions of `rsmx.operator`.

use super::ndarray::wrap;
use crate::context::Context;
use crate::custom::{BackwardCall, CustomInstance, CustomProp, ForwardCall, Inferred, Provider};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ndarray::NDArray;
use crate::op::OpReq;
use crate::shape::Shape;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};
use std::sync::Arc;

/// Installs the Python provider of custom operators.
pub fn install() {
    crate::custom::set_provider(Box::new(PyProvider));
}

static GLUE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The glue function `rsmx.operator.<name>`.
fn glue<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let m = GLUE.get_or_try_init(py, || Ok::<_, PyErr>(py.import("rsmx.operator")?.unbind()))?;
    m.bind(py).getattr(name)
}

/// A core error for a failure in the user's code, with its Python traceback.
fn user_error(py: Python<'_>, e: PyErr, what: String) -> Error {
    let text = py
        .import("traceback")
        .and_then(|tb| tb.call_method1("format_exception", (e.value(py),)))
        .and_then(|lines| lines.extract::<Vec<String>>())
        .map(|lines| lines.concat())
        .unwrap_or_else(|_| e.to_string());
    Error::Runtime(format!("{what}:\n{}", text.trim_end()))
}

struct PyProvider;

/// What `_make_prop` returns: the property object, its lists and its backward deps.
type PropParts = (Py<PyAny>, Vec<String>, Vec<String>, Vec<String>, Vec<usize>);

impl Provider for PyProvider {
    fn create(&self, op_type: &str, kwargs: &[(String, String)]) -> Result<Arc<dyn CustomProp>> {
        Python::attach(|py| {
            let run = || -> PyResult<PyProp> {
                let d = PyDict::new(py);
                for (k, v) in kwargs {
                    d.set_item(k, v)?;
                }
                let (prop, arguments, outputs, aux, deps): PropParts =
                    glue(py, "_make_prop")?.call1((op_type, d))?.extract()?;
                Ok(PyProp {
                    op_type: op_type.to_string(),
                    prop,
                    arguments,
                    outputs,
                    aux,
                    deps,
                })
            };
            match run() {
                Ok(p) => Ok(Arc::new(p) as Arc<dyn CustomProp>),
                Err(e) => Err(user_error(
                    py,
                    e,
                    format!("Custom: cannot create custom operator '{op_type}'"),
                )),
            }
        })
    }
}

/// A user's `CustomOpProp` instance, with what it lists read once.
struct PyProp {
    op_type: String,
    prop: Py<PyAny>,
    arguments: Vec<String>,
    outputs: Vec<String>,
    aux: Vec<String>,
    deps: Vec<usize>,
}

type Lists<T> = (Vec<Option<T>>, Vec<Option<T>>, Vec<Option<T>>);

impl CustomProp for PyProp {
    fn arguments(&self) -> &[String] {
        &self.arguments
    }

    fn outputs(&self) -> &[String] {
        &self.outputs
    }

    fn aux_states(&self) -> &[String] {
        &self.aux
    }

    fn backward_deps(&self) -> &[usize] {
        &self.deps
    }

    fn infer_shape(&self, args: &[Option<Shape>]) -> Result<Inferred<Option<Shape>>> {
        Python::attach(|py| {
            let given: Vec<Option<Vec<usize>>> = args
                .iter()
                .map(|s| s.as_ref().map(|s| s.to_vec()))
                .collect();
            let res = glue(py, "_infer_shape")
                .and_then(|f| f.call1((self.prop.bind(py), given)))
                .and_then(|r| r.extract::<Lists<Vec<usize>>>());
            let (a, o, x) = res.map_err(|e| {
                user_error(
                    py,
                    e,
                    format!("Custom '{}': infer_shape failed", self.op_type),
                )
            })?;
            let to_shape = |v: Vec<Option<Vec<usize>>>| -> Vec<Option<Shape>> {
                v.into_iter().map(|s| s.map(Shape::from_vec)).collect()
            };
            Ok(Inferred {
                args: to_shape(a),
                outputs: to_shape(o),
                aux: to_shape(x),
            })
        })
    }

    fn infer_type(&self, args: &[Option<DType>]) -> Result<Inferred<Option<DType>>> {
        Python::attach(|py| {
            let given: Vec<Option<&str>> = args.iter().map(|t| t.map(|t| t.name())).collect();
            let res = glue(py, "_infer_type")
                .and_then(|f| f.call1((self.prop.bind(py), given)))
                .and_then(|r| r.extract::<Lists<String>>());
            let (a, o, x) = res.map_err(|e| {
                user_error(
                    py,
                    e,
                    format!("Custom '{}': infer_type failed", self.op_type),
                )
            })?;
            let to_type = |v: Vec<Option<String>>| -> Result<Vec<Option<DType>>> {
                v.into_iter()
                    .map(|t| t.map(|t| DType::from_name(&t)).transpose())
                    .collect()
            };
            Ok(Inferred {
                args: to_type(a)?,
                outputs: to_type(o)?,
                aux: to_type(x)?,
            })
        })
    }

    fn create_operator(
        &self,
        ctx: Context,
        shapes: &[Shape],
        types: &[DType],
    ) -> Result<Arc<dyn CustomInstance>> {
        Python::attach(|py| {
            let shapes: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
            let flags: Vec<i32> = types.iter().map(|t| t.flag()).collect();
            let op = glue(py, "_create_operator")
                .and_then(|f| f.call1((self.prop.bind(py), ctx_pair(ctx), shapes, flags)))
                .map_err(|e| {
                    user_error(
                        py,
                        e,
                        format!("Custom '{}': create_operator failed", self.op_type),
                    )
                })?;
            Ok(Arc::new(PyInstance {
                op_type: self.op_type.clone(),
                op: op.unbind(),
            }) as Arc<dyn CustomInstance>)
        })
    }
}

fn ctx_pair(ctx: Context) -> (i32, i32) {
    (ctx.dev_type as i32, ctx.dev_id)
}

fn req_names(req: &[OpReq]) -> Vec<&'static str> {
    req.iter()
        .map(|r| match r {
            OpReq::Null => "null",
            OpReq::Write => "write",
            OpReq::WriteInplace => "inplace",
            OpReq::Add => "add",
        })
        .collect()
}

fn wrap_all(py: Python<'_>, arrays: Vec<NDArray>) -> PyResult<Vec<Py<PyAny>>> {
    arrays
        .into_iter()
        .map(|a| Ok(wrap(py, a)?.into_any()))
        .collect()
}

fn wrap_some(py: Python<'_>, arrays: Vec<Option<NDArray>>) -> PyResult<Vec<Option<Py<PyAny>>>> {
    arrays
        .into_iter()
        .map(|a| a.map(|a| Ok(wrap(py, a)?.into_any())).transpose())
        .collect()
}

/// A user's `CustomOp` instance.
struct PyInstance {
    op_type: String,
    op: Py<PyAny>,
}

impl CustomInstance for PyInstance {
    fn forward(&self, call: ForwardCall) -> Result<()> {
        Python::attach(|py| {
            let run = || -> PyResult<()> {
                let args = (
                    self.op.bind(py),
                    ctx_pair(call.ctx),
                    call.is_train,
                    req_names(&call.req),
                    wrap_all(py, call.in_data)?,
                    wrap_all(py, call.out_data)?,
                    wrap_all(py, call.aux)?,
                );
                glue(py, "_forward")?.call1(args)?;
                Ok(())
            };
            run().map_err(|e| {
                user_error(py, e, format!("Custom '{}': forward failed", self.op_type))
            })
        })
    }

    fn backward(&self, call: BackwardCall) -> Result<()> {
        Python::attach(|py| {
            let run = || -> PyResult<()> {
                let args = (
                    self.op.bind(py),
                    ctx_pair(call.ctx),
                    call.is_train,
                    req_names(&call.req),
                    wrap_some(py, call.out_grad)?,
                    wrap_some(py, call.in_data)?,
                    wrap_some(py, call.out_data)?,
                    wrap_all(py, call.in_grad)?,
                    wrap_all(py, call.aux)?,
                );
                glue(py, "_backward")?.call1(args)?;
                Ok(())
            };
            run().map_err(|e| {
                user_error(py, e, format!("Custom '{}': backward failed", self.op_type))
            })
        })
    }
}
