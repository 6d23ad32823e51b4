"""gRPC schema of the control plane; stubs are generated from the .proto files at import time."""
