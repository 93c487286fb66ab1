"""Small example models for op_plugin's npugraph backend (random weights, no downloads).

Each module has a model class and `build()` returning `(model, example_inputs)`, so
`op-plugin inspect examples.llama_block:build` can use it:

- `llama_block`: a LLaMA-style decoder block from the shipped custom ops (KV cache and training variants);
- `bert_layer`: a BERT-style encoder layer of plain PyTorch layers;
- `small_cnn`: a small convolutional classifier of plain PyTorch layers.
"""
