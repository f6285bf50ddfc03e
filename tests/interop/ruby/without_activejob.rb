# Loaded with RUBYOPT=-r<this file> to make Ruby behave as on a machine without Debian's
# ruby-activejob (tests/interop/test_activejob.py checks how the suite reports that).
# Debian installs it as a gem, so dropping a $LOAD_PATH entry is not enough: refuse the require.
module Kernel
  alias_method :wurk_require_with_activejob, :require

  def require(name)
    if name == "active_job" || name.start_with?("active_job/")
      raise LoadError, "cannot load such file -- #{name} (hidden by without_activejob.rb)"
    end

    wurk_require_with_activejob(name)
  end
  private :require
end
