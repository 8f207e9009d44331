// Which token dispatcher a model's passes use (dispatchers.h).
#include "dispatch/dispatchers.h"

namespace moetrain {

std::unique_ptr<TokenDispatcher> make_token_dispatcher(const ModelConfig& c,
                                                       Communicator* expert_group, bool overlap) {
    if (expert_group) return make_all_to_all_dispatcher(c, *expert_group, overlap);
    return make_local_dispatcher(c);
}

}  // namespace moetrain
