"""Quantizing a float program's weights to the schemes of ``inferx.compiler.ir.quant``.

    rtn.py        round-to-nearest, and the group rule (scale, minimum, codes) the others share
    awq.py        activation-aware scaling of input channels, searched on calibration rows
    gptq.py       column-by-column rounding with error compensation through the inverse Hessian
    calibrate.py  the statistics of each linear's input on calibration text (for awq and gptq)
    sequential.py awq or gptq linear by linear, each calibrated on the quantized ones' outputs
    store.py      the weight store of a quantized program, quantizing each weight on first read

Each quantizer takes a float weight ``[N, K]`` and returns a ``QuantizedWeight``; nothing here is
imported by this package's ``__init__``, so importing one part does not load the others (gptq
needs torch).
"""
