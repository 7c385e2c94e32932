//! Pooling, activations, softmax, batch normalisation, bias and the epilogue.
