"""The built-in reproduction suites: ``<name>.py`` (cells and claims) and ``<name>.toml``
(settings: ``[common]``, ``[quick]`` and ``[full]`` tables)."""
