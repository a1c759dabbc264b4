"""Readers of a lab's configs, shared by the validators and the backends: the QoS of
config_db (`qos`), BGP and BFD detection times of frr.conf (`frr_timers`) and the buffer
dependency graph the QoS and a FIB imply (`buffer_graph`). The interfaces, bundles and
routes the routing model starts from are read by `twin.model.wiring`."""
