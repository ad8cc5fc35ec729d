"""Scripts that render the generated tables and draw the figures of the documentation
(``python -m tools.docs.<script>``; the figures are written to ``docs/assets/``)."""
