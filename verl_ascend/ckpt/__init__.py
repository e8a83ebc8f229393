"""`verl-ascend ckpt check`: can this checkpoint folder be resumed from, here and with this recipe?"""
