"""TEST DOUBLE of torch_npu.utils: only the serialization module is modelled."""
