"""Operations: leader election, metrics, health endpoints, logging."""
