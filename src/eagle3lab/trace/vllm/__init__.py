"""vLLM, the second engine the trace reads: its EAGLE-3 interface, registry and layer convention per release."""
