"""The decode cost model, split by job.

``arch``      what a model is: parameter and KV-cache bytes per GPU under tensor parallelism, from a config.json
``hardware``  what a GPU is: datasheet bandwidth, FLOP/s, memory, interconnect (presets with their sources)
``engine``    what the serving software adds: kernel launches, CPU scheduling, the speculative cycle's passes
``forward``   the time of one forward pass: separate rooflines for weights, KV cache and compute
``cycle``     plain decoding steps and speculative cycles built from forward passes; speedup, break-even
``predict``   the one call users make: a deployment, calibrated on a measured single-stream rate if given
``measured_cycle`` the CPU harness's measured cycle (``artifacts/cycle_components.<profile>.json``) as engine terms
``validation`` the model against published measurements: development/held-out split, frozen orchestration
              constants, out-of-sample MAPE beside naive baselines (``validation_report``)
"""
