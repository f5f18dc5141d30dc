"""The ops that have no ONNX form, and why. Export takes inference programs: gradient
and optimizer ops belong to training (conv2d_grad_input aside: it is also the forward of
conv2d_transpose, and has a rule); random draws and ``assert`` cannot behave in ONNX
Runtime as they do in dy2stat."""

from __future__ import annotations

from dy2stat.onnx.lowering import refuse

refuse("is a gradient op: only inference programs export to ONNX (the exported function "
       "must not call d2s.grad or backward)",
       "cross_entropy_grad", "embedding_grad", "gelu_grad", "conv2d_grad_filter",
       "conv2d_grad_input_chwn", "conv2d_grad_filter_chwn",
       "max_pool2d_grad", "max_pool2d_grad_chwn", "avg_pool2d_grad", "sum_grad", "mean_grad",
       "sum_to_like", "split_like", "gather_grad", "tile_grad", "getitem_grad", "diag_grad",
       "batch_norm_grad", "pad_grad", "interpolate_grad", "gather_nd_grad",
       "masked_select_grad", "repeat_interleave_grad", "take_along_axis_grad", "while_grad",
       "conv2d_grad_filter_from_columns")
refuse("updates parameters (an optimizer step): only inference programs export to ONNX",
       "sgd", "momentum", "adam", "adamw", "multi_tensor_adam")
refuse("draws random numbers, which ONNX Runtime would not draw as dy2stat does; export "
       "the model in eval mode (layer.eval(): dropout draws nothing), or pass the random "
       "values in as an input",
       "uniform", "normal", "randint", "bernoulli_mask")
refuse("stops the program when its condition fails, which no ONNX op can do; check the "
       "condition outside the exported function",
       "assert")
refuse("hands a parameter's gradient to data-parallel training while the backward runs: "
       "it appears only in backward programs, which do not export to ONNX", "hand_out")
refuse("keeps a convolution's columns for its filter gradient: it appears only in training "
       "programs, which do not export to ONNX", "conv2d_keeping_columns")
