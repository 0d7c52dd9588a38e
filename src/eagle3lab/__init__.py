"""eagle3lab: reproduce, explain, fix and measure the Kimi-K2.5 + EAGLE-3 start-up crash in SGLang."""

import warnings

# transformers and huggingface_hub import tqdm.auto, which warns in every notebook that ipywidgets is missing.
# The project's own bars are plain text (eagle3lab.progress), so the warning only adds noise to the report.
warnings.filterwarnings("ignore", message="IProgress not found")

__version__ = "0.1.0"
