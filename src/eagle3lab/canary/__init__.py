"""The release canary: does a new engine release break EAGLE-3 for a model a team serves?

For each release asked (by default the newest of every engine on the package index) the static audit and
``preflight-model`` run over the EAGLE-3-capable wrappers and the watched models, from the release's own source
(its wheel, never installed), beside the release before it; a wrapper whose verdict got worse is a regression.
``engines`` says which engines the canary knows, ``rows`` what one row holds and what counts as a regression,
``run`` runs it and writes one JSON and one markdown table per release.
"""
