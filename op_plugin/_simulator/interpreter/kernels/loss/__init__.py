"""Loss ops (CANN ops-nn ``loss/``).

* loss: MseLoss, MseLossGrad, NLLLoss, NLLLossGrad
"""
