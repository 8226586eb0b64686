"""Decoder-LLM definitions: one file per architecture family mapping its HF config and weight
names onto ``config.DecoderConfig``; ``decoder.py`` builds the IR all of them share."""
