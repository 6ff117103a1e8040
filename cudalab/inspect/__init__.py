"""Looking inside a build, without a GPU: the machine code (:mod:`.sass`), theoretical occupancy
(:mod:`.occupancy`) and the data of a roofline chart (:mod:`.rooflinechart`). Pure modules: no pycuda,
no click, no matplotlib."""
