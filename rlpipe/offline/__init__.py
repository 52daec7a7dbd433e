"""The offline driver: replay, update, advantage, eval and inspect over a stored run."""
