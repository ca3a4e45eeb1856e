//! `_core.ExecutorHandle`: a bound symbol behind `rsmx.executor.Executor`.

use super::errors::{guard, guard_detached, IntoPy};
use super::ndarray::{context_of, wrap, PyNDArray};
use super::symbol::PySymbol;
use crate::error::Error;
use crate::executor::{self, BindArgs, Executor};
use crate::ndarray::NDArray;
use crate::op::OpReq;
use pyo3::prelude::*;
use std::collections::HashMap;

/// An executor.
#[pyclass(name = "ExecutorHandle", module = "rsmx._core", frozen)]
pub struct PyExecutor {
    inner: Executor,
}

fn req_of(s: &str) -> PyResult<OpReq> {
    match s {
        "null" => Ok(OpReq::Null),
        "write" => Ok(OpReq::Write),
        "add" => Ok(OpReq::Add),
        "inplace" => Ok(OpReq::WriteInplace),
        other => Err(Error::Value(format!(
            "bind: grad_req must be 'write', 'add' or 'null', got '{other}'"
        )))
        .py(),
    }
}

fn arrays(py: Python<'_>, v: &[crate::ndarray::NDArray]) -> PyResult<Vec<Py<PyNDArray>>> {
    v.iter().map(|a| wrap(py, a.clone())).collect()
}

/// Binds a symbol to arrays (lists in `list_arguments` / `list_auxiliary_states` order).
#[pyfunction]
#[pyo3(signature = (sym, ctx, args, grads, grad_reqs, aux, group2ctx, shared=None))]
#[allow(clippy::too_many_arguments)]
pub fn bind(
    py: Python<'_>,
    sym: PyRef<'_, PySymbol>,
    ctx: (i32, i32),
    args: Vec<PyRef<'_, PyNDArray>>,
    grads: Vec<Option<PyRef<'_, PyNDArray>>>,
    grad_reqs: Vec<String>,
    aux: Vec<PyRef<'_, PyNDArray>>,
    group2ctx: HashMap<String, (i32, i32)>,
    shared: Option<PyRef<'_, PyExecutor>>,
) -> PyResult<PyExecutor> {
    guard("bind", || {
        let mut g2c = HashMap::new();
        for (k, (t, i)) in group2ctx {
            g2c.insert(k, context_of(t, i)?);
        }
        let b = BindArgs {
            ctx: context_of(ctx.0, ctx.1)?,
            args: args.iter().map(|a| a.inner.clone()).collect(),
            grads: grads
                .iter()
                .map(|g| g.as_ref().map(|a| a.inner.clone()))
                .collect(),
            grad_reqs: grad_reqs
                .iter()
                .map(|r| req_of(r))
                .collect::<PyResult<Vec<_>>>()?,
            aux: aux.iter().map(|a| a.inner.clone()).collect(),
            group2ctx: g2c,
        };
        let sym = sym.inner.clone();
        let shared = shared.as_ref().map(|s| &s.inner);
        let inner = py.detach(|| executor::bind(&sym, b, shared)).py()?;
        Ok(PyExecutor { inner })
    })
}

#[pymethods]
impl PyExecutor {
    fn forward(&self, py: Python<'_>, is_train: bool) -> PyResult<()> {
        guard_detached(py, "forward", || self.inner.forward(is_train))
    }

    fn backward(
        &self,
        py: Python<'_>,
        out_grads: Vec<Option<PyRef<'_, PyNDArray>>>,
        is_train: bool,
    ) -> PyResult<()> {
        let g: Vec<Option<crate::ndarray::NDArray>> = out_grads
            .iter()
            .map(|o| o.as_ref().map(|a| a.inner.clone()))
            .collect();
        guard_detached(py, "backward", || self.inner.backward(&g, is_train))
    }

    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<Py<PyNDArray>>> {
        guard("outputs", || arrays(py, &self.inner.outputs))
    }

    fn debug_str(&self) -> PyResult<String> {
        guard("debug_str", || Ok(self.inner.debug_str()))
    }

    /// Bytes of internal memory the plan allocated.
    fn planned_bytes(&self) -> PyResult<usize> {
        guard("planned_bytes", || Ok(self.inner.planned_bytes()))
    }

    /// `(node name, is_forward, output names, output arrays, input arrays)` of every op.
    #[allow(clippy::type_complexity)]
    fn op_steps(
        &self,
        py: Python<'_>,
    ) -> PyResult<
        Vec<(
            String,
            bool,
            Vec<String>,
            Vec<Py<PyNDArray>>,
            Vec<Py<PyNDArray>>,
        )>,
    > {
        guard("op_steps", || {
            let steps = self.inner.op_steps();
            // The parts of a composite show as one entry, the composite's outputs in
            // order, where its last part runs.
            let mut parts_left: HashMap<(String, bool), usize> = HashMap::new();
            for (s, fwd) in &steps {
                if let Some((of, _)) = &s.monitor_view {
                    *parts_left.entry((of.clone(), *fwd)).or_default() += 1;
                }
            }
            let mut pending: HashMap<(String, bool), Vec<(usize, String, NDArray)>> =
                HashMap::new();
            let mut out = Vec::new();
            for (s, fwd) in steps {
                let Some((of, shown)) = &s.monitor_view else {
                    out.push((
                        s.name.clone(),
                        fwd,
                        s.op.output_names(),
                        arrays(py, &s.outputs)?,
                        arrays(py, &s.inputs)?,
                    ));
                    continue;
                };
                let key = (of.clone(), fwd);
                let seen = pending.entry(key.clone()).or_default();
                seen.extend(
                    shown
                        .iter()
                        .map(|(j, n, o)| (*j, n.clone(), s.outputs[*o].clone())),
                );
                let left = parts_left.get_mut(&key).expect("counted above");
                *left -= 1;
                if *left == 0 {
                    let mut all = pending.remove(&key).unwrap_or_default();
                    all.sort_by_key(|(j, _, _)| *j);
                    let names = all.iter().map(|(_, n, _)| n.clone()).collect();
                    let outs: Vec<NDArray> = all.into_iter().map(|(_, _, a)| a).collect();
                    out.push((of.clone(), fwd, names, arrays(py, &outs)?, Vec::new()));
                }
            }
            Ok(out)
        })
    }
}
