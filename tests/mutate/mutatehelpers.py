"""Partitions of Hive's TestMutations, shared by the mutation tests."""

ASIA_INDIA = ["Asia", "India"]
EUROPE_UK = ["Europe", "UK"]
EUROPE_FRANCE = ["Europe", "France"]
