"""Personal Agent Protocol wire types, profiles and pure verification rules."""
