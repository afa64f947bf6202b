"""Tasks (chapters 10 and 11): the copy task, German-to-English translation, and BLEU.

Layer: above training and decoding, which they use end to end; below the command line.
"""
