"""A verl launch recipe, read without running it: the layer ``check``, ``ckpt check --recipe`` and ``rehearse`` share.

``sandbox`` runs the script under bash in namespaces with ``python``/``ray`` replaced by recorders;
``extract`` returns the trainer's argv from that; ``compose`` builds the full config from the installed
verl's Hydra configs; ``layout`` reads sizes and parallel layouts from it; ``model_facts`` reads the
model's config.json. A change here changes all three tools; their tests cover it.
"""
