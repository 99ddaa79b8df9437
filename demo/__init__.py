"""The main job (``make demo``) and the pipeline shared with the fault-injection suite."""
