"""Shared test helpers (imported as ``helpers.<module>``; ``tests/`` is on pytest's path):
``browser`` (a headless page for the explorer and report tests), ``tiny_llama`` (a tiny
saved Llama and text folder), ``rank_reference`` (a brute-force AUC), ``cifar_archive``
(fabricated CIFAR archives)."""
