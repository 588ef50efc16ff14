pub(crate) mod synth;
