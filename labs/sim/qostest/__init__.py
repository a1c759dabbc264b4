"""sonic-mgmt's lossless and QoS tests on the simulator: `twin qos-test LAB` (docs/qos-tests.md).

One module per family (buffers, mapping, pause, m2o, ecn, pfcwd, hashing); each test names
its sonic-mgmt counterpart, computes its expectation from the lab's configs as sonic-mgmt's
generators do (`params`) and has the broken lab it is meant to catch (`QosTest.breaks`).
"""
