//! Definitions of the neural-network layers: dense layers, activations, softmax, losses,
//! dropout, embeddings, convolution, pooling, normalisation and the fused recurrent
//! layers, each with its backward operator registered under MXNet's name.

pub mod activation;
pub mod adaptive_pool;
pub mod batch_norm;
pub mod batch_norm_forms;
pub mod bilinear_sampler;
pub mod common;
pub mod conv_layer;
pub mod convolution;
pub mod correlation;
pub mod ctc_loss;
pub mod deconvolution;
pub mod dense;
pub mod dropout;
pub mod embedding;
pub mod fused_conv;
pub mod geometry;
pub mod grid_generator;
pub mod im2col;
pub mod leaky_relu;
pub mod make_loss;
pub mod normalization;
pub mod pooling;
pub mod regression;
pub mod rnn;
pub mod roi_pooling;
pub mod softmax;
pub mod softmax_output;
pub mod spatial_transformer;
pub mod svm_output;
pub mod upsampling;

use super::grad::BackwardEntry;
use super::Registry;

/// The backward operators of the network layers, under MXNet's names, each with the
/// forward operator whose attributes it takes.
pub(crate) const BACKWARD_OPS: &[BackwardEntry] = &[
    (
        "_backward_FullyConnected",
        "FullyConnected",
        &["ograd", "data", "weight"],
        false,
    ),
    (
        "_backward_Convolution",
        "Convolution",
        &["ograd", "data", "weight"],
        false,
    ),
    (
        "_backward_Deconvolution",
        "Deconvolution",
        &["ograd", "data", "weight"],
        false,
    ),
    (
        "_backward_Pooling",
        "Pooling",
        &["ograd", "data", "output", "index"],
        false,
    ),
    (
        "_backward_BatchNorm",
        "BatchNorm",
        &["ograd", "data", "gamma", "mean", "var"],
        false,
    ),
    (
        "_backward_Activation",
        "Activation",
        &["ograd", "output"],
        false,
    ),
    (
        "_backward_LeakyReLU",
        "LeakyReLU",
        &["ograd", "data"],
        false,
    ),
    ("_backward_Dropout", "Dropout", &["ograd", "mask"], false),
    (
        "_backward_Embedding",
        "Embedding",
        &["ograd", "data"],
        false,
    ),
    ("_backward_softmax", "softmax", &["ograd", "output"], false),
    ("_backward_softmin", "softmin", &["ograd", "output"], false),
    (
        "_backward_log_softmax",
        "log_softmax",
        &["ograd", "output"],
        false,
    ),
    (
        "_backward_SoftmaxActivation",
        "SoftmaxActivation",
        &["ograd", "output"],
        false,
    ),
    (
        "_backward_SoftmaxOutput",
        "SoftmaxOutput",
        &["label", "output"],
        false,
    ),
    (
        "_backward_linear_reg_out",
        "LinearRegressionOutput",
        &["label", "output"],
        false,
    ),
    (
        "_backward_logistic_reg_out",
        "LogisticRegressionOutput",
        &["label", "output"],
        false,
    ),
    (
        "_backward_mae_reg_out",
        "MAERegressionOutput",
        &["label", "output"],
        false,
    ),
    ("_backward_MakeLoss", "MakeLoss", &["output"], false),
    (
        "_backward_SVMOutput",
        "SVMOutput",
        &["label", "output"],
        false,
    ),
    (
        "_backward_RNN",
        "RNN",
        &["ograd", "data", "parameters", "state", "reserve"],
        false,
    ),
    (
        "_backward_GridGenerator",
        "GridGenerator",
        &["ograd"],
        false,
    ),
    (
        "_backward_BilinearSampler",
        "BilinearSampler",
        &["ograd", "data", "grid"],
        false,
    ),
    ("_backward_ctc_loss", "CTCLoss", &["ograd", "grad"], false),
    (
        "_backward_ROIPooling",
        "ROIPooling",
        &["ograd", "data", "maxidx"],
        false,
    ),
];

/// Registers the network layers, then their backward operators.
pub fn register(r: &mut Registry) {
    dense::register(r);
    activation::register(r);
    leaky_relu::register(r);
    softmax::register(r);
    softmax_output::register(r);
    regression::register(r);
    svm_output::register(r);
    make_loss::register(r);
    dropout::register(r);
    embedding::register(r);
    convolution::register(r);
    deconvolution::register(r);
    pooling::register(r);
    batch_norm::register(r);
    normalization::register(r);
    batch_norm_forms::register(r);
    upsampling::register(r);
    correlation::register(r);
    im2col::register(r);
    adaptive_pool::register(r);
    rnn::register(r);
    grid_generator::register(r);
    bilinear_sampler::register(r);
    spatial_transformer::register(r);
    roi_pooling::register(r);
    ctc_loss::register(r);
    super::grad::register_backward(r, BACKWARD_OPS);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::BACKWARD_OPS;
    use crate::op::{find, Attrs};

    /// The forward's required attributes.
    pub(crate) fn forward_attrs(forward: &str) -> Attrs {
        let pairs: &[(&str, &str)] = match forward {
            "FullyConnected" => &[("num_hidden", "2")],
            "Convolution" | "Deconvolution" => &[("kernel", "(2, 2)"), ("num_filter", "2")],
            "Pooling" => &[("kernel", "(2, 2)")],
            "Activation" => &[("act_type", "relu")],
            "Embedding" => &[("input_dim", "4"), ("output_dim", "2")],
            "RNN" => &[("state_size", "2"), ("num_layers", "1"), ("mode", "gru")],
            "GridGenerator" => &[("transform_type", "warp")],
            "ROIPooling" => &[("pooled_size", "(2, 2)"), ("spatial_scale", "1")],
            _ => &[],
        };
        crate::op::testutil::attrs(pairs)
    }

    #[test]
    fn backward_operators_are_registered_under_their_names() {
        crate::op::grad::tests::check_registered(BACKWARD_OPS, forward_attrs);
    }

    #[test]
    fn every_layer_declares_its_attributes_in_full() {
        for &(_, forward, _, _) in BACKWARD_OPS {
            assert!(!find(forward).unwrap().params.is_empty(), "{forward}");
        }
    }

    #[test]
    fn a_backward_takes_its_forward_attributes() {
        let def = find("_backward_Convolution").unwrap();
        let e = def.build(&Attrs::new()).err().unwrap();
        assert!(e.message().contains("kernel"), "{e}");
        // softmax with an output dtype takes the data too; its backward is the same op.
        let op = find("_backward_softmax")
            .unwrap()
            .build(&[("dtype".to_string(), "float64".to_string())].into())
            .unwrap();
        assert_eq!(op.name(), "_backward_softmax");
    }
}
