"""eagle3lab: reproduce, explain, fix and measure the Kimi-K2.5 + EAGLE-3 start-up crash in SGLang."""

__version__ = "0.1.0"
