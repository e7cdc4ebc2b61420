"""tests/engine: the loop's tests here; models/, attention/ and speculative/ below.

Helper modules shared by these folders (``logit_recorder``) sit beside this file: pytest puts
this folder on ``sys.path`` when it loads this conftest, before collecting any subfolder. The
model fixtures (``smol_folder``, ``smol_hf``, ``tiny_folders``) live in ``tests/conftest.py``.
"""
