"""The decode cost model, split by job.

``arch``      what a model is: parameter and KV-cache bytes per GPU under tensor parallelism, from a config.json
``hardware``  what a GPU is: datasheet bandwidth, FLOP/s, memory, interconnect (presets with their sources)
``engine``    what the serving software adds: kernel launches, CPU scheduling, the speculative cycle's passes
``forward``   the time of one forward pass: separate rooflines for weights, KV cache and compute
``cycle``     plain decoding steps and speculative cycles built from forward passes; speedup, break-even
``predict``   the one call users make: a deployment, calibrated on a measured single-stream rate if given
``measured_cycle`` the CPU harness's measured cycle (``artifacts/cycle_components.<profile>.json``) as engine terms
``validation`` the model against published measurements (data/spec_validation.yaml): every set there is seen now
``collectives`` all-reduce/all-gather times from measured curves per link (data/collectives.yaml)
``gpus``      GPU presets and GPUs given by datasheet numbers; ``hub``: a model by hub id, path or stored name
``curve``     calibration on a measured plain-decode curve; ``understood``: what predict read, where it extrapolates
``freeze``    the fitted constants as frozen (data/constants.yaml) and their commit; ``sealed``: the sealed set
``evaluation`` evaluations with three naive baselines (``baselines``), the rtx6kpro sweeps (``sweep_check``)
``h200_check`` the model's MoE and drafter terms against the raw-PyTorch H200 measurement (``devicecheck``)
"""
