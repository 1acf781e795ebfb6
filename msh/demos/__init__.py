"""The demos behind ``msh demo``: the codec over the sample messages (:mod:`.codec`), two partners over a
lossy network (:mod:`.exchange`), A → intermediary → C (:mod:`.multihop`, its journal readings in
:mod:`.multihop_records`), and the delivery report at the end of each (:mod:`.analytics`). They sit above
the runtime and the fault tools, and nothing in the MSH imports them."""
