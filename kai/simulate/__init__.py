"""`kai simulate`: the real engine on an in-memory cluster read from files (contract: shared/contracts/simulate.md)."""
