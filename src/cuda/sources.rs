//! The CUDA kernel sources (`src/kernels/cuda/`), embedded so that what `rsmx.cuda`
//! compiles is exactly what this build expects.

/// The header every module includes, under the name it includes it by.
pub const COMMON_HEADER: (&str, &str) = ("common.cuh", include_str!("../kernels/cuda/common.cuh"));

/// Each module: its name (the file stem) and its source.
pub const MODULES: &[(&str, &str)] = &[
    ("init", include_str!("../kernels/cuda/init.cu")),
    ("elemwise", include_str!("../kernels/cuda/elemwise.cu")),
    ("random", include_str!("../kernels/cuda/random.cu")),
    ("optim", include_str!("../kernels/cuda/optim.cu")),
    ("nn", include_str!("../kernels/cuda/nn.cu")),
    ("grad", include_str!("../kernels/cuda/grad.cu")),
    ("reduce", include_str!("../kernels/cuda/reduce.cu")),
    ("softmax", include_str!("../kernels/cuda/softmax.cu")),
    ("index", include_str!("../kernels/cuda/index.cu")),
    ("norm", include_str!("../kernels/cuda/norm.cu")),
    ("linalg", include_str!("../kernels/cuda/linalg.cu")),
    ("conv", include_str!("../kernels/cuda/conv.cu")),
    ("pool", include_str!("../kernels/cuda/pool.cu")),
    ("xform", include_str!("../kernels/cuda/xform.cu")),
    ("sort", include_str!("../kernels/cuda/sort.cu")),
    ("rnn", include_str!("../kernels/cuda/rnn.cu")),
    ("scan", include_str!("../kernels/cuda/scan.cu")),
    ("la", include_str!("../kernels/cuda/la.cu")),
    ("vision", include_str!("../kernels/cuda/vision.cu")),
    ("ctc", include_str!("../kernels/cuda/ctc.cu")),
    ("lamb", include_str!("../kernels/cuda/lamb.cu")),
];

/// The source of module `name`.
pub fn module(name: &str) -> Option<&'static str> {
    MODULES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cuda_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels/cuda");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".cu").map(str::to_string)
            })
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = MODULES.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
        for (name, text) in MODULES {
            assert!(text.contains("#include \"common.cuh\""), "{name}");
            assert!(
                !text.contains("#include <"),
                "{name} includes a system header"
            );
        }
        assert!(!COMMON_HEADER.1.contains("#include <"));
    }
}
