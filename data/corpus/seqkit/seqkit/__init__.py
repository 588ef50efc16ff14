from seqkit.base import SeqModule
