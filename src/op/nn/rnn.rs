//! Definition of the fused `RNN` operator (MXNet's: stacked, optionally bidirectional
//! vanilla RNN, LSTM or GRU layers run over a whole sequence) and its backward. The
//! activations the backward needs travel in a hidden last output, `reserve`.

use super::common::check_float;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::infer_from_partial;
use crate::op::{
    assign_shape, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
    ResourceRequest, ShapeSlots,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "RNN";

/// The cell each layer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RnnMode {
    /// `h' = relu(Wx·x + bx + Wh·h + bh)`.
    RnnRelu,
    /// `h' = tanh(Wx·x + bx + Wh·h + bh)`.
    RnnTanh,
    /// Gates i, f, g (the candidate), o in that order.
    Lstm,
    /// Gates r (reset), z (update), n (candidate) in that order, with the reset gate
    /// applied after the hidden product as cuDNN does: `n = tanh(Wxn·x + bxn + r⊙(Whn·h + bhn))`.
    Gru,
}

impl RnnMode {
    /// Gate blocks of `state_size` rows in each weight matrix.
    pub fn gates(self) -> usize {
        match self {
            RnnMode::RnnRelu | RnnMode::RnnTanh => 1,
            RnnMode::Lstm => 4,
            RnnMode::Gru => 3,
        }
    }
}

/// The parsed attributes.
#[derive(Debug, Clone)]
pub struct Rnn {
    pub mode: RnnMode,
    pub state_size: usize,
    pub num_layers: usize,
    pub bidirectional: bool,
    /// Dropout on the outputs of every layer but the last, while training.
    pub p: f64,
    pub state_outputs: bool,
    /// The range LSTM cell states are clipped to after each step.
    pub clip: Option<(f64, f64)>,
    /// With `clip`, a NaN cell state becomes the lower bound instead of propagating.
    pub clip_nan: bool,
    /// LSTM with a projection of the hidden state to this size (shapes only: the
    /// kernels refuse it).
    pub projection: Option<usize>,
    /// A last input gives each sequence's valid length (shapes only: the kernels refuse
    /// it).
    pub use_sequence_length: bool,
}

/// The sizes of one run: sequence length `t`, batch `n`, input features `i`, state size
/// `h`, directions `d`, layers `l` and gate blocks `g`; and where each piece lies in the
/// flat parameter vector and in the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RnnDims {
    pub t: usize,
    pub n: usize,
    pub i: usize,
    pub h: usize,
    pub d: usize,
    pub l: usize,
    pub g: usize,
    pub mode: RnnMode,
    /// True if the reserve keeps a dropout mask for the output of every layer but the
    /// last (`p > 0`); a run that does not train writes masks of ones.
    pub dropout: bool,
}

impl RnnDims {
    /// Input features of layer `layer`.
    pub fn layer_input(&self, layer: usize) -> usize {
        if layer == 0 {
            self.i
        } else {
            self.d * self.h
        }
    }

    /// Rows of each weight matrix and length of each bias: `g·h`.
    pub fn gate_rows(&self) -> usize {
        self.g * self.h
    }

    /// Offsets of the input and hidden weight matrices of (`layer`, `dir`) in the flat
    /// parameters: every layer's and direction's `Wx` then `Wh`, one after another.
    pub fn weights(&self, layer: usize, dir: usize) -> (usize, usize) {
        let gh = self.gate_rows();
        let per = |l: usize| gh * (self.layer_input(l) + self.h);
        let before: usize = (0..layer).map(|l| per(l) * self.d).sum::<usize>() + per(layer) * dir;
        (before, before + gh * self.layer_input(layer))
    }

    /// Elements of all weight matrices: the biases start there.
    pub fn weights_len(&self) -> usize {
        self.weights(self.l, 0).0
    }

    /// Offsets of the input and hidden biases of (`layer`, `dir`).
    pub fn biases(&self, layer: usize, dir: usize) -> (usize, usize) {
        let gh = self.gate_rows();
        let at = self.weights_len() + 2 * gh * (layer * self.d + dir);
        (at, at + gh)
    }

    /// Elements of the flat parameter vector.
    pub fn param_len(&self) -> usize {
        self.biases(self.l, 0).0
    }

    /// Elements one (layer, direction) keeps for the backward, each block `t·n` rows: the
    /// gates after their activations (`g·h` columns), then the cell states (LSTM) or the
    /// candidate's hidden products (GRU), then the hidden states (`h` columns each).
    pub fn cell_reserve(&self) -> usize {
        self.t * self.n * self.h * (self.g + self.has_extra() as usize + 1)
    }

    /// True if the cell keeps a second per-step value (LSTM's cell state, GRU's
    /// candidate hidden product).
    pub fn has_extra(&self) -> bool {
        matches!(self.mode, RnnMode::Lstm | RnnMode::Gru)
    }

    /// Elements of one layer's whole output, `t·n·d·h`.
    pub fn layer_output(&self) -> usize {
        self.t * self.n * self.d * self.h
    }

    /// Offset of (`layer`, `dir`)'s part of the reserve.
    pub fn cell_at(&self, layer: usize, dir: usize) -> usize {
        self.cell_reserve() * (layer * self.d + dir)
    }

    /// Offset of the dropout mask on the output of `layer` (every layer but the last).
    pub fn mask_at(&self, layer: usize) -> usize {
        self.cell_reserve() * self.l * self.d + self.layer_output() * layer
    }

    /// Elements of the reserve.
    pub fn reserve_len(&self) -> usize {
        if self.dropout {
            self.mask_at(self.l - 1)
        } else {
            self.cell_reserve() * self.l * self.d
        }
    }
}

impl Rnn {
    /// Directions: 2 if bidirectional.
    pub fn dirs(&self) -> usize {
        1 + self.bidirectional as usize
    }

    /// Inputs: data, parameters, state, (LSTM) the cell state and (with
    /// `use_sequence_length`) the sequence lengths.
    pub fn n_inputs(&self) -> usize {
        self.n_differentiable() + self.use_sequence_length as usize
    }

    /// The inputs that get a gradient: all but the sequence lengths.
    pub fn n_differentiable(&self) -> usize {
        3 + (self.mode == RnnMode::Lstm) as usize
    }

    /// Outputs a symbol shows: the output and, with `state_outputs`, the final states.
    pub fn n_visible(&self) -> usize {
        if self.state_outputs {
            self.n_differentiable() - 1
        } else {
            1
        }
    }

    /// Errors for the options only the shapes support.
    pub fn check_supported(&self, device: &str) -> Result<()> {
        if self.projection.is_some() {
            return Err(Error::NotImplemented(format!(
                "{NAME}: LSTM with projection (projection_size) is not supported on {device}"
            )));
        }
        if self.use_sequence_length {
            return Err(Error::NotImplemented(format!(
                "{NAME}: use_sequence_length is not supported on {device}; pad the sequences \
                 and mask the outputs with SequenceMask"
            )));
        }
        Ok(())
    }

    /// Elements of the flat parameters with a projection to `p`, as MXNet counts them.
    fn projected_param_len(&self, dims: &RnnDims, p: usize) -> usize {
        let size = dims.h * dims.d * dims.g;
        let first = (dims.i + p + 2) * size;
        let other = (p * dims.d + p + 2) * size;
        first + (dims.l - 1) * other + p * dims.h * dims.l * dims.d
    }

    /// The sizes of a run over `data`, checked to be (sequence, batch, features).
    pub fn dims(&self, data: &[usize]) -> Result<RnnDims> {
        let &[t, n, i] = data else {
            return Err(Error::Value(format!(
                "{NAME}: data must be 3-dimensional (sequence length, batch, input size), \
                 got shape {}",
                fmt_shape(data)
            )));
        };
        Ok(RnnDims {
            t,
            n,
            i,
            h: self.state_size,
            d: self.dirs(),
            l: self.num_layers,
            g: self.mode.gates(),
            mode: self.mode,
            dropout: self.p > 0.0 && self.num_layers > 1,
        })
    }

    /// The shape of the initial and final states, `(layers·directions, batch, state)`,
    /// hidden (`cell` false) or cell; a projection shortens the hidden one.
    fn state_shape(&self, n: usize, cell: bool) -> Shape {
        let size = match self.projection {
            Some(p) if !cell => p,
            _ => self.state_size,
        };
        Shape::from_slice(&[self.num_layers * self.dirs(), n, size])
    }
}

impl Operator for Rnn {
    fn name(&self) -> &'static str {
        NAME
    }

    fn num_outputs(&self) -> usize {
        self.n_visible() + 1
    }

    fn num_visible_outputs(&self) -> usize {
        self.n_visible()
    }

    fn mxnet_num_outputs(&self) -> usize {
        self.n_visible()
    }

    fn optional_outputs(&self) -> &'static [usize] {
        match self.n_visible() {
            1 => &[1],
            2 => &[2],
            _ => &[3],
        }
    }

    fn input_names(&self) -> Option<Vec<String>> {
        let names = ["data", "parameters", "state", "state_cell"];
        let mut v: Vec<String> = names[..self.n_differentiable()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if self.use_sequence_length {
            v.push("sequence_length".into());
        }
        Some(v)
    }

    fn output_names(&self) -> Vec<String> {
        let names = ["output", "state_output", "statecell_output"];
        let mut v: Vec<String> = names[..self.n_visible()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.push("reserve".into());
        v
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::TempSpace, ResourceRequest::Random]
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        if inputs.len() != self.n_inputs() {
            return Err(Error::Value(format!(
                "{NAME}: expected {} inputs ({}), got {}",
                self.n_inputs(),
                self.input_names().unwrap_or_default().join(", "),
                inputs.len()
            )));
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        let dims = self.dims(&data)?;
        let params = match self.projection {
            Some(p) => self.projected_param_len(&dims, p),
            None => dims.param_len(),
        };
        assign_shape(
            NAME,
            "parameters",
            &mut inputs[1],
            &Shape::from_slice(&[params]),
        )?;
        let (state, cell) = (
            self.state_shape(dims.n, false),
            self.state_shape(dims.n, true),
        );
        assign_shape(NAME, "state", &mut inputs[2], &state)?;
        if self.mode == RnnMode::Lstm {
            assign_shape(NAME, "state_cell", &mut inputs[3], &cell)?;
        }
        if self.use_sequence_length {
            let last = self.n_inputs() - 1;
            assign_shape(
                NAME,
                "sequence_length",
                &mut inputs[last],
                &Shape::from_slice(&[dims.n]),
            )?;
        }
        let out = Shape::from_slice(&[dims.t, dims.n, dims.d * state[2]]);
        assign_shape(NAME, "output", &mut outputs[0], &out)?;
        for (k, o) in outputs[1..self.n_visible()].iter_mut().enumerate() {
            assign_shape(NAME, "state output", o, if k == 0 { &state } else { &cell })?;
        }
        let last = self.n_visible();
        assign_shape(
            NAME,
            "reserve",
            &mut outputs[last],
            &Shape::from_slice(&[dims.reserve_len()]),
        )?;
        Ok(())
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        // The sequence lengths may be of any type.
        let t = crate::op::same_dtype(NAME, &inputs[..inputs.len().min(self.n_differentiable())])?;
        check_float(NAME, "data", t)?;
        Ok(vec![t; self.num_outputs()])
    }

    fn gradient(&self) -> Grad {
        let reserve = self.n_visible();
        Grad::Op(Gradient {
            op: Arc::new(RnnBackward(self.clone())),
            ograds: (0..self.n_visible()).collect(),
            inputs: (0..self.n_inputs()).collect(),
            outputs: vec![reserve],
            grad_of: (0..self.n_differentiable()).collect(),
        })
    }
}

/// Inputs: the gradients of the visible outputs, the forward's inputs and its reserve. Outputs: the gradients of data, parameters, state and (LSTM) cell state.
pub struct RnnBackward(pub Rnn);

impl Operator for RnnBackward {
    fn name(&self) -> &'static str {
        "_backward_RNN"
    }

    fn num_outputs(&self) -> usize {
        self.0.n_differentiable()
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let (v, k) = (self.0.n_visible(), self.0.n_inputs());
        crate::op::check_inputs(self.name(), inputs, v + k + 1)?;
        let fwd = &inputs[v..v + k];
        let mut ins: Vec<Option<Shape>> = fwd.iter().cloned().map(Some).collect();
        let mut outs: Vec<Option<Shape>> = vec![None; self.0.num_outputs()];
        self.0.infer_shape_partial(&mut ins, &mut outs)?;
        let expect = outs.into_iter().flatten().collect::<Vec<_>>();
        let given = inputs[..v].iter().chain([&inputs[v + k]]);
        let want = expect[..v].iter().chain([&expect[v]]);
        for (g, w) in given.zip(want) {
            if g.as_slice() != w.as_slice() {
                return Err(Error::Value(format!(
                    "{}: got an output gradient or forward output of shape {}, expected {} \
                     for data {}",
                    self.name(),
                    fmt_shape(g),
                    fmt_shape(w),
                    fmt_shape(&inputs[v])
                )));
            }
        }
        Ok(fwd[..self.num_outputs()].to_vec())
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let t = crate::op::same_dtype(self.name(), &inputs[..self.0.n_visible() + 1])?;
        Ok(vec![t; self.num_outputs()])
    }

    fn resources(&self) -> &'static [ResourceRequest] {
        &[ResourceRequest::TempSpace]
    }
}

const PARAMS: &[Param] = &[
    Param::required(
        "state_size",
        "int (non-negative)",
        "size of the state for each layer",
    ),
    Param::required(
        "num_layers",
        "int (non-negative)",
        "number of stacked layers",
    ),
    Param::new(
        "bidirectional",
        "boolean",
        "False",
        "whether to use bidirectional recurrent layers",
    ),
    Param::required(
        "mode",
        "{'gru', 'lstm', 'rnn_relu', 'rnn_tanh'}",
        "the type of RNN to compute",
    ),
    Param::new(
        "p",
        "float",
        "0",
        "drop rate of the dropout on the outputs of each RNN layer, except the last layer.",
    ),
    Param::new(
        "state_outputs",
        "boolean",
        "False",
        "Whether to have the states as symbol outputs.",
    ),
    Param::new(
        "projection_size",
        "int or None",
        "None",
        "size of project size",
    ),
    Param::new(
        "lstm_state_clip_min",
        "double or None",
        "None",
        "Minimum clip value of LSTM states. This option must be used together with \
         lstm_state_clip_max.",
    ),
    Param::new(
        "lstm_state_clip_max",
        "double or None",
        "None",
        "Maximum clip value of LSTM states. This option must be used together with \
         lstm_state_clip_min.",
    ),
    Param::new(
        "lstm_state_clip_nan",
        "boolean",
        "False",
        "Whether to stop NaN from propagating in state by clipping it to min/max. If \
         clipping range is not specified, this option is ignored.",
    ),
    Param::new(
        "use_sequence_length",
        "boolean",
        "False",
        "If set to true, this layer takes in an extra input parameter `sequence_length` to \
         specify variable length sequence",
    ),
];

fn positive(p: &Params, key: &str) -> Result<usize> {
    let v: i64 = p.get(key)?;
    if v < 1 {
        return Err(Error::Value(format!(
            "{NAME}: {key} must be positive, got {v}"
        )));
    }
    Ok(v as usize)
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    let mode = match p.get_choice("mode", &["rnn_relu", "rnn_tanh", "lstm", "gru"])? {
        "rnn_relu" => RnnMode::RnnRelu,
        "rnn_tanh" => RnnMode::RnnTanh,
        "lstm" => RnnMode::Lstm,
        _ => RnnMode::Gru,
    };
    let prob: f64 = p.get("p")?;
    if !(0.0..1.0).contains(&prob) {
        return Err(Error::Value(format!(
            "{NAME}: p must be in [0, 1), got {prob}"
        )));
    }
    let projection = match p.get::<Option<i64>>("projection_size")? {
        None => None,
        Some(v) if mode == RnnMode::Lstm && v >= 1 => Some(v as usize),
        Some(v) => {
            return Err(Error::Value(format!(
                "{NAME}: projection_size must be positive and is only supported for LSTM, \
                 got {v} for mode {}",
                p.get::<String>("mode")?
            )))
        }
    };
    let lo: Option<f64> = p.get("lstm_state_clip_min")?;
    let hi: Option<f64> = p.get("lstm_state_clip_max")?;
    let clip = match (lo, hi) {
        (None, None) => None,
        (Some(lo), Some(hi)) => {
            if mode != RnnMode::Lstm {
                return Err(Error::Value(format!(
                    "{NAME}: state clipping is only supported for LSTM"
                )));
            }
            if hi < lo {
                return Err(Error::Value(format!(
                    "{NAME}: lstm_state_clip_max ({hi}) must be greater or equal to \
                     lstm_state_clip_min ({lo})"
                )));
            }
            Some((lo, hi))
        }
        _ => {
            return Err(Error::Value(format!(
                "{NAME}: lstm_state_clip_min and lstm_state_clip_max must be specified together"
            )))
        }
    };
    Ok(Arc::new(Rnn {
        mode,
        state_size: positive(&p, "state_size")?,
        num_layers: positive(&p, "num_layers")?,
        bidirectional: p.get("bidirectional")?,
        p: prob,
        state_outputs: p.get("state_outputs")?,
        clip,
        clip_nan: p.get("lstm_state_clip_nan")?,
        projection,
        use_sequence_length: p.get("use_sequence_length")?,
    }))
}

/// Registers `RNN`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &[],
        inputs: &["data", "parameters", "state", "state_cell"],
        variadic: false,
        params: PARAMS,
        doc: "Applies stacked, optionally bidirectional recurrent layers (vanilla RNN with \
              ReLU or tanh, LSTM, or GRU) to a sequence, with all their weights and biases \
              in one flat parameter vector.",
        create: Box::new(create),
    });
}
