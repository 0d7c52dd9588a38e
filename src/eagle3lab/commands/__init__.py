"""``python -m eagle3lab ...``: one module per subcommand, ``cli`` builds the parser and runs them."""
