"""What the user touches; the top layer, nothing imports it.

- ``widgets``: :class:`~olas_utils.ui.widgets.OLAExplorer`, the interactive ipywidgets panel;
- ``cli``: the ``olas`` command (``models``, ``extract``, ``similarity``, ``reproduce``);
- ``reproduce``: runs the numbered notebooks with papermill (``make reproduce``).
"""
