"""kplm stage package."""
